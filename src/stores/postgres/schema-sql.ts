/** The tables and functions PostgresStore keeps its state in, as the SQL that creates them. */
/**
 * Every function is versioned (`_v1`): a changed one gets a new name, so processes of two versions never mix them.
 */
import { optionalBoolean } from '../../core/validate.js';
import { tableName } from './postgres-options.js';
import { stepFunctionsSql } from './step-sql.js';

/**
 * The SQL that creates the store's tables and functions for table `table` (a validated identifier, possibly
 * `schema.name`): `CREATE TABLE IF NOT EXISTS` and `CREATE OR REPLACE FUNCTION`, so it can run at every start.
 * One transaction under an advisory lock, so processes that start together do not race on the catalog.
 */
export function schemaSql(table: string, unlogged: boolean): string {
  const t = table;
  const slots = `${table}_slots`;
  const bare = table.slice(table.lastIndexOf('.') + 1);
  return `
SELECT pg_advisory_xact_lock(hashtextextended('floodgate schema ' || ${literal(table)}, 0));
CREATE ${unlogged ? 'UNLOGGED ' : ''}TABLE IF NOT EXISTS ${t} (
  key text COLLATE "C" PRIMARY KEY,
  x bigint,
  y bigint,
  z bigint,
  lg bigint[],
  blocked_until bigint NOT NULL DEFAULT 0,
  expires_at bigint
);
CREATE INDEX IF NOT EXISTS ${bare}_expires_at ON ${t} (expires_at);
CREATE ${unlogged ? 'UNLOGGED ' : ''}TABLE IF NOT EXISTS ${slots} (
  key text COLLATE "C" NOT NULL,
  owner text COLLATE "C" NOT NULL,
  expires_at bigint NOT NULL,
  PRIMARY KEY (key, owner)
);
CREATE INDEX IF NOT EXISTS ${bare}_slots_expires_at ON ${slots} (expires_at);
${stepFunctionsSql(t)}
CREATE OR REPLACE FUNCTION ${t}_now_v1() RETURNS bigint LANGUAGE sql VOLATILE AS $fn$
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
$fn$;

CREATE OR REPLACE FUNCTION ${t}_apply_v1(
  keys text[], algos int[], limits bigint[], caps bigint[], inits bigint[], windows bigint[], ends1 bigint[], ends2 bigint[],
  blocks bigint[], firsts int[], kinds int[], amounts bigint[], nows bigint[])
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
-- Batches of operations, one key and policy each (batch i holds operations firsts[i] .. firsts[i + 1] - 1), applied in
-- order per key; rows locked in key order, so two calls never wait on each other in a cycle. Five numbers per operation.
DECLARE
  res bigint[] := array_fill(0::bigint, ARRAY[cardinality(kinds) * 5]);
  server_now bigint := ${t}_now_v1();
  ordered int[] := ARRAY[1];
  bi int;
  oi int;
  last int;
  had boolean;
  x bigint; y bigint; z bigint; lg bigint[]; b bigint;
  x0 bigint; y0 bigint; z0 bigint; lg0 bigint[]; b0 bigint;
  r record;
  inserted int;
BEGIN
  -- One batch, the common case on a quiet store, needs no sort (a query of its own).
  IF cardinality(keys) > 1 THEN
    ordered := ARRAY(SELECT g FROM generate_subscripts(keys, 1) g ORDER BY keys[g] COLLATE "C", g);
  END IF;
  FOREACH bi IN ARRAY ordered LOOP
    last := CASE WHEN bi < cardinality(firsts) THEN firsts[bi + 1] - 1 ELSE cardinality(kinds) END;
    LOOP
      SELECT c.x, c.y, c.z, c.lg, c.blocked_until INTO x, y, z, lg, b FROM ${t} c WHERE c.key = keys[bi] FOR UPDATE;
      had := FOUND;
      IF NOT had THEN b := 0; END IF;
      x0 := x; y0 := y; z0 := z; lg0 := lg; b0 := b;
      FOR oi IN firsts[bi] .. last LOOP
        r := ${t}_step_v1(x, y, z, lg, b, kinds[oi], amounts[oi], coalesce(nows[oi], server_now), algos[bi],
          limits[bi], caps[bi], inits[bi], windows[bi], ends1[bi], ends2[bi], blocks[bi]);
        x := r.x; y := r.y; z := r.z; lg := r.lg; b := r.b;
        res[oi * 5 - 4] := r.allowed;
        res[oi * 5 - 3] := r.remaining;
        res[oi * 5 - 2] := r.reset_ms;
        res[oi * 5 - 1] := r.retry_ms;
        res[oi * 5] := r.empty_ms;
      END LOOP;
      -- A state equal to the one read (peeks, refused consumes) needs no write.
      EXIT WHEN (x IS NOT DISTINCT FROM x0 AND y IS NOT DISTINCT FROM y0 AND z IS NOT DISTINCT FROM z0
        AND lg IS NOT DISTINCT FROM lg0 AND b = b0);
      IF r.expires = 0 THEN
        IF had THEN DELETE FROM ${t} WHERE key = keys[bi]; END IF;
        EXIT;
      END IF;
      IF had THEN
        UPDATE ${t} SET x = r.x, y = r.y, z = r.z, lg = r.lg, blocked_until = r.b, expires_at = r.expires WHERE key = keys[bi];
        EXIT;
      END IF;
      INSERT INTO ${t} (key, x, y, z, lg, blocked_until, expires_at) VALUES (keys[bi], r.x, r.y, r.z, r.lg, r.b, r.expires)
        ON CONFLICT (key) DO NOTHING;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      -- Another call created the key since it was read: decide again on its state, now locked.
      EXIT WHEN inserted = 1;
    END LOOP;
  END LOOP;
  RETURN res;
END $fn$;

CREATE OR REPLACE FUNCTION ${t}_consume_all_v1(
  keys text[], algos int[], limits bigint[], caps bigint[], inits bigint[], windows bigint[], ends1 bigint[], ends2 bigint[],
  blocks bigint[], costs bigint[], now_arg bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
-- composite.ts applyComposite: every part (distinct keys) spends its cost, or only refusing parts change (their block).
DECLARE
  res bigint[] := array_fill(0::bigint, ARRAY[cardinality(keys) * 5]);
  now bigint := coalesce(now_arg, ${t}_now_v1());
  fits boolean[] := array_fill(false, ARRAY[cardinality(keys)]);
  everyone boolean := true;
  i int;
  r record;
  s record;
BEGIN
  -- Phase 1, in key order: lock each row (an absent key gets an empty row to lock, removed below) and try it.
  FOR i IN SELECT g FROM generate_subscripts(keys, 1) g ORDER BY keys[g] COLLATE "C" LOOP
    INSERT INTO ${t} (key, blocked_until, expires_at) VALUES (keys[i], 0, 0) ON CONFLICT (key) DO NOTHING;
    SELECT c.x, c.y, c.z, c.lg, c.blocked_until AS b INTO s FROM ${t} c WHERE c.key = keys[i] FOR UPDATE;
    r := ${t}_step_v1(s.x, s.y, s.z, s.lg, s.b, 1, costs[i], now, algos[i], limits[i], caps[i], inits[i],
      windows[i], ends1[i], ends2[i], blocks[i]);
    fits[i] := r.allowed = 1;
    IF NOT fits[i] THEN everyone := false; END IF;
  END LOOP;
  -- Phase 2: spend everywhere, or refuse (and block) where it did not fit and report a peek where it did.
  FOR i IN 1 .. cardinality(keys) LOOP
    SELECT c.x, c.y, c.z, c.lg, c.blocked_until AS b INTO s FROM ${t} c WHERE c.key = keys[i];
    r := ${t}_step_v1(s.x, s.y, s.z, s.lg, s.b, CASE WHEN everyone OR NOT fits[i] THEN 1 ELSE 2 END,
      costs[i], now, algos[i], limits[i], caps[i], inits[i], windows[i], ends1[i], ends2[i], blocks[i]);
    res[i * 5 - 4] := r.allowed;
    res[i * 5 - 3] := r.remaining;
    res[i * 5 - 2] := r.reset_ms;
    res[i * 5 - 1] := r.retry_ms;
    res[i * 5] := r.empty_ms;
    IF everyone OR NOT fits[i] THEN
      IF r.expires = 0 THEN
        DELETE FROM ${t} WHERE key = keys[i];
      ELSE
        UPDATE ${t} SET x = r.x, y = r.y, z = r.z, lg = r.lg, blocked_until = r.b, expires_at = r.expires WHERE key = keys[i];
      END IF;
    ELSIF s.x IS NULL AND s.lg IS NULL AND s.b = 0 THEN
      -- Unspent and empty (a key that was absent): its row only served as a lock.
      DELETE FROM ${t} WHERE key = keys[i];
    END IF;
  END LOOP;
  RETURN res;
END $fn$;

CREATE OR REPLACE FUNCTION ${t}_acquire_slot_v1(k text, lim bigint, own text, ttl bigint, now_arg bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
-- acquire-slot.lua: {admitted (1/0), slots in use after the call, ms until the earliest slot expires when refused}.
DECLARE
  now bigint := coalesce(now_arg, ${t}_now_v1());
  n bigint;
  held boolean;
  earliest bigint;
BEGIN
  -- Counting and adding must not interleave between two callers: one lock per key, held until the call ends.
  PERFORM pg_advisory_xact_lock(hashtextextended(${literal(`${table} slots `)} || k, 0));
  DELETE FROM ${slots} WHERE key = k AND expires_at <= now;
  SELECT count(*), bool_or(owner = own), min(expires_at) INTO n, held, earliest FROM ${slots} WHERE key = k;
  IF n < lim OR held THEN
    INSERT INTO ${slots} (key, owner, expires_at) VALUES (k, own, now + ttl)
      ON CONFLICT (key, owner) DO UPDATE SET expires_at = excluded.expires_at;
    RETURN ARRAY[1, n + CASE WHEN held THEN 0 ELSE 1 END, 0];
  END IF;
  RETURN ARRAY[0, n, earliest - now];
END $fn$;

CREATE OR REPLACE FUNCTION ${t}_release_slot_v1(k text, own text, now_arg bigint)
RETURNS int LANGUAGE plpgsql AS $fn$
-- release-slot.lua: 1 when an unexpired slot of the owner was freed, else 0.
DECLARE
  was bigint;
BEGIN
  DELETE FROM ${slots} WHERE key = k AND owner = own RETURNING expires_at INTO was;
  RETURN CASE WHEN was > coalesce(now_arg, ${t}_now_v1()) THEN 1 ELSE 0 END;
END $fn$;

CREATE OR REPLACE FUNCTION ${t}_renew_slot_v1(k text, own text, ttl bigint, now_arg bigint)
RETURNS int LANGUAGE plpgsql AS $fn$
-- renew-slot.lua: 1 when the owner's unexpired slot now expires ttl from now; an expired one is dropped, never revived.
DECLARE
  now bigint := coalesce(now_arg, ${t}_now_v1());
  n int;
BEGIN
  UPDATE ${slots} SET expires_at = now + ttl WHERE key = k AND owner = own AND expires_at > now;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN DELETE FROM ${slots} WHERE key = k AND owner = own; END IF;
  RETURN n;
END $fn$;

CREATE OR REPLACE FUNCTION ${t}_clean_v1(now_arg bigint, slack bigint, batch int)
RETURNS int LANGUAGE plpgsql AS $fn$
-- Deletes up to batch expired rows of each table, skipping rows a call holds: clean-up never waits and never blocks one.
DECLARE
  now bigint := coalesce(now_arg, ${t}_now_v1()) - slack;
  n int;
  m int;
BEGIN
  DELETE FROM ${t} WHERE key IN (SELECT key FROM ${t} WHERE expires_at <= now LIMIT batch FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS n = ROW_COUNT;
  DELETE FROM ${slots} WHERE (key, owner) IN
    (SELECT key, owner FROM ${slots} WHERE expires_at <= now LIMIT batch FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS m = ROW_COUNT;
  RETURN n + m;
END $fn$;
`;
}

/**
 * The SQL that creates PostgresStore's tables and functions, for `createSchema: false`: run it once (it is idempotent)
 * as a user allowed to create them.
 */
export function postgresSchemaSql(options: { table?: string; unlogged?: boolean } = {}): string {
  return schemaSql(tableName(options.table, 'postgresSchemaSql'), optionalBoolean(options.unlogged, 'postgresSchemaSql unlogged') ?? false);
}

/** `text` as an SQL string literal. */
function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
