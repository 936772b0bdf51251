"""``mnemo memory``: the state of memory, and reindexing after an embedder change."""

from __future__ import annotations

import click

from memory_core import heartbeats
from memory_core.db import open_ops, open_state
from memory_core.embedders.factory import make_embedder
from memory_core.status import memory_status
from memory_core.vectors import VectorIndex
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.data_dir import require_data_dir
from scripts.cli.memory_recall_cmds import explain, recollect
from scripts.cli.memory_sweep import sweep_cmd
from scripts.cli.progress import progress_for, quiet_option


@click.group()
def memory() -> None:
    """Inspect memory and keep its vector index in step with the embedder.

    Example:

        mnemo memory status --json
    """


@memory.command()
@json_option
@click.pass_obj
@handle_errors
def status(obj: Ctx, as_json: bool) -> None:
    """Active vs recorded embedder, match state, and row, vector and missing-vector counts
    per table.

    When the embedders differ, dense search is off (keyword-only recall) until
    `mnemo memory reindex`. Rows with no vector ("missing") are not found by dense
    search; `mnemo memory reindex` fills them. The extractor's rules: the tenants whose
    turns were extracted by older rules than this release's, for `mnemo beliefs
    reextract`.

    Example:

        mnemo memory status
    """
    from memory_core.write.reextract import rules_drift  # the extractor's version only

    require_data_dir(obj.settings)
    state = open_state(obj.settings)
    try:
        ops = open_ops(obj.settings)
        try:
            beats = heartbeats.read_all(ops.conn, heartbeats.WORKER)
        finally:
            ops.close()
        report = memory_status(state, VectorIndex(make_embedder(obj.settings)))
        drift = rules_drift(state.conn, beats)
    finally:
        state.close()
    report["extractor"] = drift.to_dict()
    if as_json:
        emit_json(report)
        return
    emb = report["embedder"]
    click.echo(f"database          {report['database']} (schema {report['schema_version']})")
    click.echo(f"active embedder   {emb['active']}")
    click.echo(f"recorded embedder {emb['recorded'] or '-'}")
    match = {True: "yes", False: "NO (workers of the active embedder refuse to start)",
             None: "- (the first worker or write records the active one)"}
    click.echo(f"match             {match[emb['match']]}")
    click.echo(f"dense search      {report['dense_search']}")
    if report["reindex_in_progress"]:
        click.echo("reindex           in progress (run `mnemo memory reindex` to finish it)")
    if report["missing_vectors"]:
        click.echo(f"missing vectors   {report['missing_vectors']} (run `mnemo memory "
                   "reindex` to fill them)")
    since = "no worker of this release has started yet" if drift.since is None \
        else f"run here since {drift.since}"
    click.echo(f"extractor rules   {drift.version} ({since})")
    if drift.upgrading:
        running = [w for w in drift.older_workers if w.running]
        click.echo(f"older workers     {len(running)} worker(s) still run other extractor "
                   f"rules ({', '.join(sorted({w.rules or 'unnamed' for w in running}))}): "
                   "re-extract once every worker runs this release")
    if drift.behind:
        click.echo(f"older beliefs     {len(drift.behind)} tenant(s), "
                   f"{sum(drift.behind.values())} turns extracted by older rules (run `mnemo "
                   "beliefs reextract --all-tenants --dry-run` to see what the current rules "
                   "change)")
    click.echo("")
    emit_table(["table", "rows", "vectors", "missing"],
               [[name, t["rows"], _dash(t["vectors"]), _dash(t["missing"])]
                for name, t in report["tables"].items()])


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


@memory.command()
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=256, show_default=True,
              help="Rows embedded per transaction.")
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def reindex(obj: Ctx, batch_size: int, as_json: bool, quiet: bool) -> None:
    """Re-embed every episode and belief with the active embedder, or fill missing vectors.

    When the recorded embedder differs, builds a new vector generation beside the old one
    and switches to it in one transaction; recall stays keyword-only until it ends. When it
    matches, embeds only the rows that have no vector (see `mnemo memory status`).
    Idempotent (a complete current index is left alone) and resumable: if it is killed,
    run it again and it continues where it stopped. Progress (rows embedded per table,
    rate, ETA) goes to stderr; --quiet or --json silence it.

    Example:

        MNEMO_EMBEDDER=fastembed MNEMO_EMBED_MODEL=sentence-transformers/all-MiniLM-L6-v2 \\
        MNEMO_EMBED_MODEL_PATH=/models/all-MiniLM-L6-v2-onnx mnemo memory reindex
    """
    state = open_state(obj.settings)
    index = VectorIndex(make_embedder(obj.settings))
    try:
        with progress_for("reindex", as_json=as_json, quiet=quiet) as bar:
            report = index.reindex(state.conn, batch_size=batch_size, progress=bar)
        counts = index.counts(state.conn)
    finally:
        state.close()
    result = {"generation": report.generation, "already_current": report.already_current,
              "embedded": report.embedded, "filled": report.filled,
              "nothing_to_do": report.nothing_to_do, "vectors": counts}
    if as_json:
        emit_json(result)
    elif report.nothing_to_do:
        click.echo(f"vector index already matches the active embedder (generation "
                   f"{report.generation}) and no vector is missing; nothing to do")
    elif report.already_current:
        click.echo(f"filled missing vectors in generation {report.generation}: "
                   + ", ".join(f"{k} {v}" for k, v in report.filled.items()))
    else:
        click.echo(f"reindexed into generation {report.generation}: "
                   + ", ".join(f"{k} {v}" for k, v in counts.items()))


# Defined beside recall's own CLI module; they belong to the `memory` noun.
memory.add_command(explain)
memory.add_command(recollect)
memory.add_command(sweep_cmd)
