/* A measured option, not used by mnemo (bench/bm25_in_c.py compiles and times it).

   An FTS5 auxiliary function: tbm25(fts, N, avgdl, nscored) is bm25 over the first
   nscored phrases of the MATCH expression with the caller's N and average length (one
   tenant's, from fts_stats), FTS5's arithmetic otherwise (k1 1.2, b 0.75, idf floored at
   1e-6; a phrase's document count from FTS5's own phrase query), higher is better. The
   entry point finds FTS5's fts5_api through "SELECT fts5(?1)", which Python cannot do. */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <math.h>
#include <string.h>

static int count_cb(const Fts5ExtensionApi *api, Fts5Context *ctx, void *p) {
  (*(sqlite3_int64 *)p)++;
  return SQLITE_OK;
}

typedef struct { int n; double idf[64]; } Data;

static void tbm25(const Fts5ExtensionApi *api, Fts5Context *ctx, sqlite3_context *out,
                  int nVal, sqlite3_value **apVal) {
  double N = sqlite3_value_double(apVal[0]);
  double avgdl = sqlite3_value_double(apVal[1]);
  int nscored = sqlite3_value_int(apVal[2]);
  int nPhrase = api->xPhraseCount(ctx);
  if (nscored > nPhrase) nscored = nPhrase;
  if (nscored > 64) nscored = 64;
  Data *d = (Data *)api->xGetAuxdata(ctx, 0);
  if (d == 0) {
    d = (Data *)sqlite3_malloc(sizeof(Data));
    d->n = nscored;
    for (int i = 0; i < nscored; i++) {
      sqlite3_int64 df = 0;
      api->xQueryPhrase(ctx, i, &df, count_cb);
      double idf = log((N - df + 0.5) / (df + 0.5));
      d->idf[i] = idf > 0 ? idf : 1e-6;
    }
    api->xSetAuxdata(ctx, d, sqlite3_free);
  }
  int dl = 0;
  api->xColumnSize(ctx, 0, &dl);
  double norm = 1.2 * (1 - 0.75 + 0.75 * dl / avgdl), score = 0;
  for (int i = 0; i < d->n; i++) {
    Fts5PhraseIter it; int iCol, iOff, tf = 0;
    for (api->xPhraseFirst(ctx, i, &it, &iCol, &iOff); iCol >= 0;
         api->xPhraseNext(ctx, &it, &iCol, &iOff)) tf++;
    if (tf) score += d->idf[i] * (tf * 2.2 / (tf + norm));
  }
  sqlite3_result_double(out, score);
}

int sqlite3_tbm_init(sqlite3 *db, char **pzErr, const sqlite3_api_routines *pApi) {
  SQLITE_EXTENSION_INIT2(pApi);
  fts5_api *fts = 0;
  sqlite3_stmt *st = 0;
  int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, 0);
  if (rc != SQLITE_OK) return rc;
  sqlite3_bind_pointer(st, 1, (void *)&fts, "fts5_api_ptr", 0);
  sqlite3_step(st);
  sqlite3_finalize(st);
  if (fts == 0) return SQLITE_ERROR;
  return fts->xCreateFunction(fts, "tbm25", 0, tbm25, 0);
}
