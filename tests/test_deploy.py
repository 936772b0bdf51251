"""deploy/ as an operator uses it: every file parses, every `mnemo` command and flag it
calls exists in the CLI (and runs with `--help`), every MNEMO_* name is a setting and every
environment it sets is one `Settings.from_env` accepts, no URL carries a password, and the
shapes production relies on hold (one scheduler, Redis with appendonly, probes on the worker
and the scheduler). Docker, compose and Kubernetes do not run here: those files are checked
by parsing; the systemd units also pass `systemd-analyze verify`, and the probe commands the
files call are run against a real `mnemo worker` and `mnemo scheduler`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from memory_core.settings import VARIABLES, Settings
from scripts.cli import main
from tests.conftest import REPO, service_unavailable
from tests.helpers.cli_tree import option_names

DEPLOY = REPO / "deploy"
UNITS = DEPLOY / "systemd"
K8S = DEPLOY / "k8s"
MNEMO_BIN = Path(sys.executable).with_name("mnemo")
SETTING_NAMES = frozenset(v.env for v in VARIABLES)
FILLER_PASSWORD = "deploy-test-password"
EXPECTED_UNITS = {"mnemo-up.service", "mnemo-worker@.service", "mnemo-scheduler.service"}


@dataclass(frozen=True)
class Call:
    """One `mnemo ...` command line a deploy file runs: argv after `mnemo`, where it is,
    and the deployment whose environment it runs in."""

    where: str
    argv: tuple[str, ...]
    deployment: str = "none"  # "none": prose (README, comments), no environment

    def __str__(self) -> str:
        return f"{self.where}: `mnemo {shlex.join(self.argv)}`"


# --- parsing ------------------------------------------------------------------------------

def parse_unit(path: Path) -> list[tuple[str, str, str]]:
    """(section, key, value) of a systemd unit, in order (keys may repeat)."""
    entries: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, eq, value = line.partition("=")
        assert eq and section, f"{path.name}:{number}: not `Key=value` inside a [Section]"
        entries.append((section, key.strip(), value.strip()))
    return entries


def unit_values(path: Path, key: str, section: str = "Service") -> list[str]:
    return [v for s, k, v in parse_unit(path) if s == section and k == key]


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        line = pending + stripped
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, f"{path.name}: ends inside a continued line"
    return out


def dockerfile_json(path: Path, instruction: str) -> list[str]:
    """The exec (JSON) form of the last ``instruction``; the shell form is refused."""
    values = [rest for word, rest in dockerfile_instructions(path) if word == instruction]
    assert values, f"{path.name} has no {instruction}"
    parsed = json.loads(values[-1])
    assert isinstance(parsed, list) and all(isinstance(p, str) for p in parsed), (
        f"{path.name}: {instruction} must be in exec form: a JSON list of strings")
    return parsed


def entrypoint() -> list[str]:
    return dockerfile_json(DEPLOY / "Dockerfile", "ENTRYPOINT")


def load_yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def compose() -> dict[str, Any]:
    (doc,) = load_yaml_docs(DEPLOY / "compose.yaml")
    return doc


def k8s_objects() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p in sorted(K8S.glob("*.yaml")) for d in load_yaml_docs(p)]


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    found = [d for _, d in k8s_objects()
             if d.get("kind") == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"deploy/k8s: expected one {kind} {name}, found {len(found)}"
    return found[0]


def env_file(path: Path, *, uncomment: bool = False) -> dict[str, str]:
    """NAME=value lines; with ``uncomment``, also the `# MNEMO_X=value` examples."""
    out: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if uncomment and re.match(r"#\s*MNEMO_[A-Z0-9_]+=", line):
            line = line.lstrip("#").strip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        assert eq, f"{path.name}: `{line}` is not NAME=value"
        out[name.strip()] = value.strip()
    return out


def is_mnemo(token: str) -> bool:
    return token == "mnemo" or token.endswith("/bin/mnemo")


def _runs_mnemo(tokens: list[str], i: int) -> bool:
    """Whether ``tokens[i]`` starts a mnemo command: the first word, the binary by path,
    after `--` (kubectl exec) or `exec SERVICE` (docker compose exec), or the image in
    `docker run ... mnemo:TAG ARGS` (its entry point is mnemo). Not `-n mnemo`, `-u mnemo`,
    `-t mnemo:TAG` or `useradd ... mnemo`: there it is a name."""
    token = tokens[i]
    if token.startswith("mnemo:"):
        return "run" in tokens[:i] and tokens[i - 1] not in {"-t", "--tag"}
    if token != "mnemo":
        return token.endswith("/bin/mnemo")
    return i == 0 or tokens[i - 1] == "--" or (i >= 2 and tokens[i - 2] == "exec")


def shell_calls(text: str, where: str, deployment: str = "none") -> Iterator[Call]:
    """`mnemo ...` inside a shell command line, up to a shell operator or a comment."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:
        return
    for i in range(len(tokens)):
        if _runs_mnemo(tokens, i):
            rest = []
            for t in tokens[i + 1:]:
                if t in {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}:
                    break
                rest.append(t)
            yield Call(where, tuple(rest), deployment)
            return


# --- the calls each file makes --------------------------------------------------------------

def unit_calls() -> list[Call]:
    calls = []
    for path in sorted(UNITS.glob("*.service")):
        for section, key, value in parse_unit(path):
            if section == "Service" and key.startswith("Exec"):
                argv = shlex.split(value.lstrip("-@:+!"))
                assert is_mnemo(argv[0]), f"{path.name}: {key} runs `{argv[0]}`, not mnemo"
                calls.append(Call(f"deploy/systemd/{path.name} {key}", tuple(argv[1:]),
                                  "systemd"))
    return calls


def mnemo_services() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose()["services"].items()
            if str(svc.get("image", "")).startswith("mnemo:")
            or str(svc.get("build", {}).get("dockerfile", "")).endswith("deploy/Dockerfile")}


def healthcheck_argv(test: Any, where: str) -> list[str]:
    """The command a compose healthcheck runs: ["CMD", ...] exactly; a CMD-SHELL string is
    split as a shell line."""
    if isinstance(test, list) and test[0] == "CMD":
        return test[1:]
    if isinstance(test, list) and test[0] == "CMD-SHELL":
        return shlex.split(test[1])
    assert isinstance(test, str), f"{where}: a healthcheck test is a list or a string"
    return shlex.split(test)


def compose_calls() -> list[Call]:
    calls = []
    for name, svc in mnemo_services().items():
        assert "entrypoint" not in svc, f"compose service {name} overrides the entrypoint"
        command = svc.get("command", dockerfile_json(DEPLOY / "Dockerfile", "CMD"))
        argv = [*entrypoint(), *(shlex.split(command) if isinstance(command, str) else command)]
        assert is_mnemo(argv[0])
        calls.append(Call(f"deploy/compose.yaml services.{name}.command", tuple(argv[1:]),
                          "compose"))
        test = svc.get("healthcheck", {}).get("test")
        if test is not None:
            hc = healthcheck_argv(test, name)
            assert is_mnemo(hc[0]), f"compose service {name}: its healthcheck runs {hc[0]}"
            calls.append(Call(f"deploy/compose.yaml services.{name}.healthcheck",
                              tuple(hc[1:]), "compose"))
    return calls


def mnemo_containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for path, doc in k8s_objects():
        if doc.get("kind") not in {"Deployment", "StatefulSet", "Job", "CronJob", "Pod"}:
            continue
        spec = doc["spec"]
        pod = spec["template"]["spec"] if "template" in spec else spec
        for container in pod.get("initContainers", []) + pod["containers"]:
            if str(container.get("image", "")).startswith("mnemo:"):
                yield f"deploy/k8s/{path.name} {doc['metadata']['name']}/{container['name']}", \
                    container


def k8s_calls() -> list[Call]:
    calls = []
    for where, container in mnemo_containers():
        argv = [*container.get("command", entrypoint()), *container.get("args", [])]
        assert is_mnemo(argv[0]), f"{where} runs {argv[0]}"
        calls.append(Call(f"{where} args", tuple(argv[1:]), "k8s"))
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe in container:
                command = container[probe]["exec"]["command"]
                assert is_mnemo(command[0]), f"{where} {probe} runs {command[0]}"
                calls.append(Call(f"{where} {probe}", tuple(command[1:]), "k8s"))
    return calls


def dockerfile_calls() -> list[Call]:
    path = DEPLOY / "Dockerfile"
    calls = [Call("deploy/Dockerfile ENTRYPOINT+CMD",
                  tuple([*entrypoint(), *dockerfile_json(path, "CMD")][1:]), "docker")]
    for word, rest in dockerfile_instructions(path):
        if word == "HEALTHCHECK":
            _, _, command = rest.partition("CMD ")
            argv = json.loads(command)
            assert is_mnemo(argv[0]), f"Dockerfile HEALTHCHECK runs {argv[0]}"
            calls.append(Call("deploy/Dockerfile HEALTHCHECK", tuple(argv[1:]), "docker"))
    return calls


def prose_calls() -> list[Call]:
    """`mnemo ...` in backticks anywhere under deploy/, in the README's shell blocks, and in
    the `#   command` example lines of the files' header comments."""
    calls: list[Call] = []
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPO))
        for span in re.findall(r"`(mnemo [^`]+)`", text):
            calls.extend(shell_calls(span, f"{where} `{span}`"))
        for line in text.splitlines():
            if re.match(r"#\s{3,}\S", line):
                calls.extend(shell_calls(line.lstrip("#"), f"{where} comment"))
        if path.suffix == ".md":
            for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
                for line in block.splitlines():
                    calls.extend(shell_calls(line, f"{where} sh block"))
    return calls


@cache
def all_calls() -> tuple[Call, ...]:
    return tuple(unit_calls() + compose_calls() + k8s_calls() + dockerfile_calls()
                 + prose_calls())


# --- the click tree ---------------------------------------------------------------------------

def resolve(call: Call) -> tuple[tuple[str, ...], click.Command]:
    """Walk ``call.argv`` down the real click tree; fail naming the file and what is wrong."""
    command: click.Command = main
    path: tuple[str, ...] = ()
    positional: list[str] = []
    argv = list(call.argv)
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token.startswith("-") and token != "-":
            name, eq, _ = token.partition("=")
            if name in {"-h", "--help"}:
                continue
            option = option_names(command).get(name)
            assert option is not None, (
                f"{call}: `mnemo {' '.join(path)}` has no option {name}; it has: "
                f"{', '.join(sorted(option_names(command))) or 'none'}")
            takes_value = not (option.is_flag or option.count)
            assert takes_value or not eq, f"{call}: {name} is a flag and takes no value"
            if takes_value and not eq:
                assert i + option.nargs <= len(argv), f"{call}: {name} needs a value"
                i += option.nargs
            continue
        if isinstance(command, click.Group) and not positional:
            sub = command.get_command(click.Context(command), token)
            assert sub is not None, (
                f"{call}: there is no command `mnemo {' '.join((*path, token))}`")
            command, path = sub, (*path, token)
            continue
        positional.append(token)
    if isinstance(command, click.Group):  # prose may name a group (`mnemo schedules`)
        assert call.deployment == "none" and not positional, (
            f"{call}: `mnemo {' '.join(path)}` is a group, not a command")
        return path, command
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    required = sum(a.nargs for a in arguments if a.required and a.nargs > 0)
    unbounded = any(a.nargs == -1 for a in arguments)
    most = sum(a.nargs for a in arguments if a.nargs > 0)
    assert len(positional) >= required, f"{call}: `mnemo {' '.join(path)}` needs arguments"
    assert unbounded or len(positional) <= most, (
        f"{call}: `mnemo {' '.join(path)}` takes {most} argument(s), got {positional}")
    return path, command


# --- the environments -------------------------------------------------------------------------

def filled(env: Mapping[str, str]) -> dict[str, str]:
    """An environment with its password placeholders ("", "...") filled in."""
    return {k: (FILLER_PASSWORD if k.endswith("_PASSWORD") and v in {"", "..."} else v)
            for k, v in env.items()}


def compose_environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: str(v) for k, v in env.items()}


def environments() -> dict[str, dict[str, str]]:
    """Each deployment's MNEMO_* environment, as its processes get it."""
    docker = dict(kv.split("=", 1) for word, rest in
                  dockerfile_instructions(DEPLOY / "Dockerfile") if word == "ENV"
                  for kv in shlex.split(rest))
    docker = {k: v for k, v in docker.items() if k.startswith("MNEMO_")}
    worker = mnemo_services()["worker"]
    env_files = worker.get("env_file", [])
    assert env_files in ([".env"], ".env"), "compose: the mnemo env_file is deploy/.env"
    compose_env = {**docker, **env_file(DEPLOY / "compose.env.example", uncomment=True),
                   **compose_environment(worker)}
    config = k8s_object("ConfigMap", "mnemo-config")["data"]
    (secret,) = load_yaml_docs(K8S / "secret.example.yaml")
    k8s_env = {**docker, **config, **secret["stringData"]}
    return {
        "systemd": filled(env_file(DEPLOY / "mnemo.env.example", uncomment=True)),
        "compose": filled(compose_env),
        "k8s": filled(k8s_env),
        "docker": docker,
        "none": {},
    }


# --- tests: commands ----------------------------------------------------------------------------

def test_the_extractors_find_what_each_file_runs() -> None:
    """A parser that finds nothing would make every other test pass: count what it finds."""
    by_file: dict[str, int] = {}
    prose: dict[str, int] = {}
    for call in all_calls():
        key = call.where.split(" ")[0]
        counts = prose if call.deployment == "none" else by_file
        counts[key] = counts.get(key, 0) + 1
    for unit in EXPECTED_UNITS:
        assert by_file.get(f"deploy/systemd/{unit}") == 2, (unit, by_file)  # migrate + run
    assert by_file["deploy/compose.yaml"] == 5  # migrate, worker + probe, scheduler + probe
    assert by_file["deploy/Dockerfile"] == 2
    assert sum(n for f, n in by_file.items() if f.startswith("deploy/k8s/")) == 8
    assert prose["deploy/README.md"] >= 10, prose
    assert prose["deploy/compose.yaml"] >= 1, prose  # its header's examples


@pytest.mark.parametrize("call", all_calls(), ids=str)
def test_every_mnemo_command_and_flag_exists(call: Call) -> None:
    resolve(call)


def test_a_bogus_flag_or_command_is_caught() -> None:
    """The checker itself: a renamed command or a flag the CLI lacks fails it."""
    for argv in (("health", "--wroker"), ("workers",), ("db",), ("health", "--pid"),
                 ("health", "--worker=yes"), ("up", "extra")):
        with pytest.raises(AssertionError):
            resolve(Call("test", argv, "systemd"))
    assert resolve(Call("test", ("health", "--worker", "--pid", "7")))[0] == ("health",)


def _help(call: Call, env: Mapping[str, str], home: Path) -> tuple[Call, int, str]:
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LANG": "C.UTF-8"}
    result = subprocess.run([str(MNEMO_BIN), *call.argv, "--help"], env={**base, **env},
                            capture_output=True, text=True, timeout=120)
    return call, result.returncode, result.stdout + result.stderr


def test_each_command_line_runs_with_help_under_its_deployments_settings(
        tmp_path: Path) -> None:
    """The real `mnemo` console script, each distinct command line a deployment runs +
    `--help`, with the environment that deployment gives it: a renamed command or option,
    or settings the root command refuses, exit non-zero. (Prose mentions are checked
    against the click tree only.)"""
    assert MNEMO_BIN.exists(), f"{MNEMO_BIN}: install the package (pip install -e .)"
    envs = environments()
    distinct = {(c.argv, c.deployment): c for c in all_calls() if c.deployment != "none"}
    assert len(distinct) >= 12, distinct
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda c: _help(c, envs[c.deployment], tmp_path),
                                distinct.values()))
    failed = [f"{call} (as in {call.deployment}): exit {code}\n{out[-600:]}"
              for call, code, out in results if code != 0]
    assert not failed, "\n".join(failed)
    assert all("Example:" in out for _, _, out in results)


# --- tests: settings ----------------------------------------------------------------------------

def test_every_mnemo_name_in_deploy_is_a_setting() -> None:
    """Every MNEMO_* word in every file (comments and prose too): mnemo refuses to start on
    an unknown name, so a typo here is an outage there. `MNEMO_HEALTH_*` is a prefix."""
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"MNEMO_[A-Z0-9_]*(\*)?", text):
            word = match.group(0)
            if word.endswith("*"):
                prefix = word.rstrip("*")
                assert any(n.startswith(prefix) for n in SETTING_NAMES), (path.name, word)
            elif word.endswith("_"):  # MNEMO_*_PASSWORD: the words around it are checked
                continue
            else:
                assert word in SETTING_NAMES, (
                    f"{path.relative_to(REPO)}: {word} is not a setting "
                    "(memory_core/settings.py, docs/configuration.md)")


@pytest.mark.parametrize("deployment", ["systemd", "compose", "k8s", "docker"])
def test_each_deployment_environment_is_accepted_by_settings(deployment: str) -> None:
    """What each deployment sets parses as real Settings: the URL grammar (no password in a
    URL), the passwords with their URLs, every value in range."""
    env = environments()[deployment]
    assert env, f"{deployment}: no MNEMO_* environment found"
    settings = Settings.from_env(env)
    assert str(settings.data_dir) == "/var/lib/mnemo"
    if deployment in {"compose", "k8s"}:
        assert settings.broker_kind == "redis" and settings.redis_require_persistence
        assert settings.postgres_url and settings.neo4j_url
        assert settings.redis_password == settings.postgres_password == FILLER_PASSWORD


def test_no_password_in_a_url_or_in_plain_configuration() -> None:
    userinfo = re.compile(r"\b[a-z][a-z0-9+]*://[^\s/@:]*:[^\s/@]+@")
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        assert not userinfo.search(path.read_text(encoding="utf-8")), (
            f"{path.relative_to(REPO)}: a URL with a password")
    config = k8s_object("ConfigMap", "mnemo-config")["data"]
    assert not [k for k in config if "PASSWORD" in k], "passwords go in the Secret"
    for name, svc in mnemo_services().items():
        assert not [k for k in compose_environment(svc) if "PASSWORD" in k], (
            f"compose {name}: passwords come from deploy/.env, not compose.yaml")
    for path in sorted(UNITS.glob("*.service")):
        assert not [v for v in unit_values(path, "Environment") if "PASSWORD" in v], path


# --- tests: shapes ------------------------------------------------------------------------------

def _command_of(svc: dict[str, Any]) -> list[str]:
    command = svc.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def test_compose_one_scheduler_scaled_workers_persistent_redis_and_probes() -> None:
    doc = compose()
    services = mnemo_services()
    schedulers = {n: s for n, s in services.items() if _command_of(s)[:1] in (["scheduler"],
                                                                               ["up"])}
    assert list(schedulers) == ["scheduler"], schedulers
    assert services["scheduler"]["deploy"]["replicas"] == 1
    workers = {n: s for n, s in services.items() if _command_of(s)[:1] == ["worker"]}
    assert list(workers) == ["worker"]
    assert services["worker"]["deploy"]["replicas"] >= 2
    for name in ("worker", "scheduler"):
        svc = services[name]
        test = healthcheck_argv(svc["healthcheck"]["test"], name)
        assert test[:3] == ["mnemo", "health", f"--{name}"], test
        assert "container_name" not in svc and "ports" not in svc, f"{name} cannot scale"
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert "mnemo-data:/var/lib/mnemo" in svc["volumes"]
    assert _command_of(services["migrate"]) == ["db", "migrate"]
    redis = doc["services"]["redis"]
    script = " ".join(_command_of(redis))
    assert re.search(r"--appendonly yes\b", script), "Redis must run with appendonly yes"
    assert any(v.endswith(":/data") for v in redis["volumes"]), "Redis needs a data volume"
    assert "--requirepass" not in script, "the Redis password must not be on its command line"
    assert doc["services"]["postgres"]["image"].startswith("pgvector/pgvector:pg16")
    assert re.match(r"neo4j:5[.\d]*", doc["services"]["neo4j"]["image"])
    for name in ("redis", "postgres", "neo4j"):
        assert doc["services"][name].get("healthcheck"), f"{name} has no healthcheck"
        assert "mnemo-data" not in str(doc["services"][name].get("volumes"))
    assert set(doc["volumes"]) >= {"mnemo-data", "redis-data", "postgres-data", "neo4j-data"}


def _probe(container: dict[str, Any], probe: str) -> list[str]:
    return container[probe]["exec"]["command"]


def test_k8s_scheduler_is_one_recreated_replica_and_workers_have_probes() -> None:
    worker = k8s_object("Deployment", "mnemo-worker")
    scheduler = k8s_object("Deployment", "mnemo-scheduler")
    assert scheduler["spec"]["replicas"] == 1
    assert scheduler["spec"]["strategy"]["type"] == "Recreate"
    assert worker["spec"]["replicas"] >= 2
    schedulers = [d for _, d in k8s_objects() if d.get("kind") == "Deployment"
                  and d["spec"]["template"]["spec"]["containers"][0].get("args") == ["scheduler"]]
    assert len(schedulers) == 1
    for deployment, role in ((worker, "worker"), (scheduler, "scheduler")):
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["args"] == [role]
        assert _probe(container, "livenessProbe") == ["mnemo", "health", f"--{role}"]
        ready = _probe(container, "readinessProbe")
        assert ready[:3] == ["mnemo", "health", f"--{role}"]
        assert (ready[3:] == ["--ready"]) == (role == "worker"), ready
        assert deployment["spec"]["selector"]["matchLabels"].items() <= \
            deployment["spec"]["template"]["metadata"]["labels"].items()
        refs = {(k, v["name"]) for e in container["envFrom"] for k, v in e.items()}
        assert refs == {("configMapRef", "mnemo-config"), ("secretRef", "mnemo-secrets")}
        assert pod["enableServiceLinks"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName")
                  for v in pod["volumes"]}
        assert claims[mounts["/var/lib/mnemo"]] == "mnemo-data"
        term = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term[0]["topologyKey"] == "kubernetes.io/hostname"
    k8s_object("PersistentVolumeClaim", "mnemo-data")
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource
    assert "secret.example.yaml" not in kustomization["resources"], "never apply placeholders"


def test_systemd_units_are_hardened_and_restart_on_failure() -> None:
    assert {p.name for p in UNITS.glob("*.service")} == EXPECTED_UNITS
    data_dir = env_file(DEPLOY / "mnemo.env.example")["MNEMO_DATA_DIR"]
    runs = {"mnemo-up.service": ("up",), "mnemo-worker@.service": ("worker",),
            "mnemo-scheduler.service": ("scheduler",)}
    sd_notify = any("NOTIFY_SOCKET" in p.read_text(encoding="utf-8")
                    for d in ("memory_core", "workers", "schedules", "scripts")
                    for p in (REPO / d).rglob("*.py"))
    for path in sorted(UNITS.glob("*.service")):
        one = {k: v for s, k, v in parse_unit(path) if s == "Service"}
        (start,) = unit_values(path, "ExecStart")
        assert tuple(shlex.split(start)[1:]) == runs[path.name]
        assert one["Restart"] == "on-failure"
        assert one["NoNewPrivileges"] == "yes"
        assert one["ProtectSystem"] == "strict"
        assert data_dir in " ".join(unit_values(path, "ReadWritePaths")).split()
        assert one["User"] == "mnemo" and one["KillMode"] == "mixed"
        assert "/etc/mnemo/mnemo.env" in unit_values(path, "EnvironmentFile")
        assert "WatchdogSec" not in one or sd_notify, (
            f"{path.name}: WatchdogSec without sd_notify in mnemo kills a healthy service")


def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path) -> None:
    """systemd's own parser: an unknown key or a bad value is a warning on stderr."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        service_unavailable("systemd-analyze")
    for path in UNITS.glob("*.service"):  # the real binary, so verify can check it
        text = path.read_text(encoding="utf-8").replace("/opt/mnemo/.venv/bin/mnemo",
                                                        str(MNEMO_BIN))
        (tmp_path / path.name).write_text(text, encoding="utf-8")
    result = subprocess.run([str(analyze), "verify", *sorted(EXPECTED_UNITS)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_dockerfile_builds_the_package_as_a_non_root_mnemo_entrypoint() -> None:
    path = DEPLOY / "Dockerfile"
    steps = dockerfile_instructions(path)
    froms = [rest.split()[0] for word, rest in steps if word == "FROM"]
    assert froms[-1] == "python:3.11-slim", froms
    users = [rest for word, rest in steps if word == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    assert entrypoint() == ["mnemo"]
    env = environments()["docker"]
    volumes = [v for word, rest in steps if word == "VOLUME" for v in json.loads(rest)]
    assert env["MNEMO_DATA_DIR"] in volumes
    assert any(word == "HEALTHCHECK" for word, _ in steps)
    # The COPY sources exist, cover the packages pyproject.toml builds, and pass the
    # .dockerignore (which otherwise leaves the context empty).
    copied = {src for word, rest in steps if word == "COPY" and "--from" not in rest
              for src in rest.split()[:-1]}
    assert all((REPO / src).exists() for src in copied), copied
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]
                ["include"]}
    assert packages <= copied, f"the image lacks {packages - copied}"
    assert pyproject["project"]["readme"] in copied
    allowed = {line[1:].split("/")[0] for line in
               (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
               if line.startswith("!")}
    assert copied <= allowed, f"excluded by Dockerfile.dockerignore: {copied - allowed}"


# --- the probes the files call, against real processes ----------------------------------------

@dataclass
class _Running:
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {n}\n" + (tmp_path / n).read_text(errors="replace")[-1500:]
                     for n in ("worker.log", "scheduler.log") if (tmp_path / n).exists())


def _probe_calls() -> list[Call]:
    return [c for c in all_calls() if c.argv[:1] == ("health",) and c.deployment != "none"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_files_probes_pass_on_a_running_worker_and_scheduler_and_fail_after(
        tmp_path: Path) -> None:
    """`mnemo worker` and `mnemo scheduler` as separate processes sharing one data folder
    (the compose and Kubernetes shape, on the embedded queue): every health probe the files
    call exits 0 while they run and 2 once they stopped."""
    probes = {c.argv for c in _probe_calls()}
    assert probes == {("health", "--worker"), ("health", "--scheduler"),
                      ("health", "--worker", "--ready")}, probes
    base = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env = {**base, "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "error",
           "MNEMO_HEARTBEAT_INTERVAL_S": "1"}
    subprocess.run([str(MNEMO_BIN), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=120)

    def probe(argv: tuple[str, ...]) -> int:
        return subprocess.run([str(MNEMO_BIN), *argv], env=env, capture_output=True,
                              timeout=60).returncode

    running = _Running()
    logs = []
    try:
        for argv in (["worker", "--processes", "1", "--threads", "1", "--grace", "2"],
                     ["scheduler"]):
            log = open(tmp_path / f"{argv[0]}.log", "wb")  # noqa: SIM115
            logs.append(log)
            running.procs.append(subprocess.Popen([str(MNEMO_BIN), *argv], env=env,
                                                  stdout=log, stderr=log))

        # Generous: the worker migrates, loads the embedder and spawns a process first, and
        # each probe is a fresh interpreter (seconds each on a loaded 2-core machine).
        deadline = time.monotonic() + 240
        for argv in sorted(probes):
            while (code := probe(argv)) != 0 and time.monotonic() < deadline:
                assert all(p.poll() is None for p in running.procs), _logs(tmp_path)
                time.sleep(0.5)
            assert code == 0, f"`mnemo {' '.join(argv)}` exits {code}\n{_logs(tmp_path)}"
    finally:
        running.stop()
        for log in logs:
            log.close()
    assert [p.returncode for p in running.procs] == [0, 0], _logs(tmp_path)
    for argv in sorted(probes):
        assert probe(argv) == 2, argv
