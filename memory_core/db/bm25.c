/* mnemo's keyword ranking in C: an SQLite loadable extension (not a Python module), built
   at install time when a C compiler and sqlite3ext.h are there (setup.py, optional),
   loaded by db.sqlite.connect, used by recall.keyword.ranked_ids.

   mnemo_bm25(fts, rows, avgdl, nscored) is an FTS5 auxiliary function: bm25 over the first
   nscored phrases of the MATCH expression (each one token) with the caller's N and average
   length, those of one tenant (fts_stats); FTS5's own bm25() takes both from the whole
   index, that is from every tenant. A phrase's document frequency is the number of rows
   its token is in (FTS5's phrase query over the whole index; a token names its tenant, so
   these are the tenant's rows). Higher is better.

   The arithmetic is recall.keyword._bm25_order's, operation for operation, so the scores are
   the same doubles and the ranking the same: k1 1.2, b 0.75, idf floored at 1e-6, a row's
   terms summed in phrase order. Built with -ffp-contract=off: a fused multiply-add would
   round differently from Python. */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <math.h>

static const double K1 = 1.2;
static const double B = 0.75;
static const double K1_PLUS_1 = 1.2 + 1.0; /* keyword.K1_PLUS_1 = K1 + 1 */
static const double MIN_IDF = 1e-6;

/* Per query (FTS5 auxiliary data): the idf of each scored phrase. */
typedef struct {
  int n;
  double idf[];
} Idfs;

static int count_row(const Fts5ExtensionApi *api, Fts5Context *ctx, void *count) {
  (void)api;
  (void)ctx;
  (*(sqlite3_int64 *)count)++;
  return SQLITE_OK;
}

static int query_idfs(const Fts5ExtensionApi *api, Fts5Context *ctx, double rows, int n,
                      Idfs **out) {
  int phrases = api->xPhraseCount(ctx);
  if (n > phrases) n = phrases;
  if (n < 0) n = 0;
  Idfs *d = sqlite3_malloc64(sizeof(Idfs) + sizeof(double) * (sqlite3_uint64)n);
  if (d == 0) return SQLITE_NOMEM;
  d->n = n;
  for (int i = 0; i < n; i++) {
    sqlite3_int64 df = 0;
    int rc = api->xQueryPhrase(ctx, i, &df, count_row);
    if (rc != SQLITE_OK) {
      sqlite3_free(d);
      return rc;
    }
    /* keyword._idf: log((rows - df + 0.5) / (df + 0.5)), floored as FTS5 floors it */
    double idf = log((rows - (double)df + 0.5) / ((double)df + 0.5));
    d->idf[i] = idf > 0 ? idf : MIN_IDF;
  }
  *out = d;
  return SQLITE_OK;
}

static void mnemo_bm25(const Fts5ExtensionApi *api, Fts5Context *ctx, sqlite3_context *out,
                       int nVal, sqlite3_value **apVal) {
  if (nVal != 3) {
    sqlite3_result_error(out, "mnemo_bm25(fts, rows, avgdl, nscored) takes 3 values", -1);
    return;
  }
  double avgdl = sqlite3_value_double(apVal[1]);
  Idfs *d = (Idfs *)api->xGetAuxdata(ctx, 0);
  if (d == 0) {
    int rc = query_idfs(api, ctx, sqlite3_value_double(apVal[0]),
                        sqlite3_value_int(apVal[2]), &d);
    if (rc == SQLITE_OK) rc = api->xSetAuxdata(ctx, d, sqlite3_free); /* frees d on error */
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(out, rc);
      return;
    }
  }
  int dl = 0;
  int rc = api->xColumnSize(ctx, 0, &dl); /* the row's tokens: its _docsize value */
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(out, rc);
    return;
  }
  double norm = K1 * (1 - B + B * dl / avgdl);
  double score = 0.0;
  for (int i = 0; i < d->n; i++) {
    Fts5PhraseIter it;
    int col = 0, off = 0, tf = 0;
    rc = api->xPhraseFirst(ctx, i, &it, &col, &off);
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(out, rc);
      return;
    }
    for (; col >= 0; api->xPhraseNext(ctx, &it, &col, &off)) tf++;
    if (tf > 0) score = score + d->idf[i] * (tf * K1_PLUS_1 / (tf + norm));
  }
  sqlite3_result_double(out, score);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_mnemobm25_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  SQLITE_EXTENSION_INIT2(pApi);
  fts5_api *fts = 0;
  sqlite3_stmt *st = 0;
  /* FTS5 hands its API out through a pointer bound to "SELECT fts5(?1)" */
  int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, 0);
  if (rc != SQLITE_OK) return rc;
  sqlite3_bind_pointer(st, 1, (void *)&fts, "fts5_api_ptr", 0);
  sqlite3_step(st);
  rc = sqlite3_finalize(st);
  if (rc != SQLITE_OK) return rc;
  if (fts == 0 || fts->iVersion < 2) {
    if (pzErrMsg) *pzErrMsg = sqlite3_mprintf("mnemo_bm25 needs FTS5 (fts5_api version 2)");
    return SQLITE_ERROR;
  }
  return fts->xCreateFunction(fts, "mnemo_bm25", 0, mnemo_bm25, 0);
}
