/** The PL/pgSQL twin of applyOperation: one operation on one key's state, every algorithm, no table access. */
/**
 * The same steps and integer arithmetic as src/algorithms/*.ts and the Lua scripts, so PostgreSQL decides as they do.
 */

/**
 * `CREATE OR REPLACE FUNCTION` text of `<name>_step_v1` and its helper `<name>_wait_v1`, for the functions named
 * after the table `name` (schema-qualified or not).
 *
 * State: `x, y, z` the algorithm's numbers (fixed window c, r; sliding window p, c, s; token bucket m, r), `lg` the
 * sliding log's timestamps oldest first; `x` (or `lg` for the log) NULL for no usage; `b` the block end (0 none,
 * -1 until unblocked). Algorithm codes: 0 fixed window, 1 sliding window, 2 sliding log, 3 token bucket; operation
 * codes as OP_CODE. A calendar window sends its two period ends (`e1`, `e2`; 0 otherwise). The outcome's five
 * numbers use -1 for Infinity, and `expires` is applyOperation's expiresAt: 0 for no state, NULL for never.
 */
export function stepFunctionsSql(name: string): string {
  return `
CREATE OR REPLACE FUNCTION ${name}_wait_v1(p bigint, c bigint, s bigint, cost bigint, now bigint, l bigint, w bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $fn$
-- sliding-window.ts waitFor: ms until cost fits; NULL for never (a cost above the limit, JavaScript's Infinity). The
-- products are taken in double precision, as JavaScript and Lua take them: a count saturated at 2^52 times a window
-- is past bigint, and the same IEEE operations in the same order give the same numbers.
DECLARE
  e bigint := now - s;
BEGIN
  IF p::float8 * (w - e) + (c + cost)::float8 * w <= (l * w)::float8 THEN RETURN 0; END IF;
  IF c + cost <= l THEN
    RETURN w - floor(((l - c - cost) * w)::float8 / p)::bigint - e;
  END IF;
  IF c = 0 THEN RETURN NULL; END IF;
  RETURN (s + w + (w - floor((l - cost)::float8 * w / c)) - now)::bigint;
END $fn$;

CREATE OR REPLACE FUNCTION ${name}_step_v1(
  INOUT x bigint, INOUT y bigint, INOUT z bigint, INOUT lg bigint[], INOUT b bigint,
  kind int, amount bigint, now bigint, algo int, l bigint, cap bigint, init bigint, w bigint, e1 bigint, e2 bigint, blk bigint,
  OUT allowed bigint, OUT remaining bigint, OUT reset_ms bigint, OUT retry_ms bigint, OUT empty_ms bigint, OUT expires bigint)
LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
  cost bigint := CASE WHEN kind = 1 THEN amount ELSE 1 END;
  ok boolean := true;
  fits boolean;
  n int;
  i int;
  st bigint;
  units bigint;
  uf float8;
  full_units bigint;
  lft bigint;
  w1 bigint;
BEGIN
  -- normalize: what has expired by now is dropped.
  IF algo = 0 THEN
    IF x IS NOT NULL AND now >= y THEN x := NULL; y := NULL; END IF;
  ELSIF algo = 1 THEN
    IF x IS NOT NULL THEN
      st := now - now % w;
      IF z = st THEN
        NULL;
      ELSIF z = st - w AND y > 0 THEN
        x := y; y := 0; z := st;
      ELSE
        x := NULL; y := NULL; z := NULL;
      END IF;
    END IF;
  ELSIF algo = 2 THEN
    IF lg IS NOT NULL THEN
      n := cardinality(lg);
      i := 1;
      WHILE i <= n AND lg[i] <= now - w LOOP i := i + 1; END LOOP;
      IF i > n THEN lg := NULL; ELSIF i > 1 THEN lg := lg[i:n]; END IF;
    END IF;
  ELSE
    -- A full bucket is forgotten; a new key's bucket starts now, initialTokens short of full (token-bucket.ts).
    IF x IS NULL OR (x - now) * l + y <= 0 THEN
      units := (cap - init) * w;
      IF units > 0 THEN x := now + units / l; y := units % l; ELSE x := NULL; y := NULL; END IF;
    END IF;
  END IF;
  IF b > 0 AND b <= now THEN b := 0; END IF;

  IF kind = 6 THEN
    x := NULL; y := NULL; z := NULL; lg := NULL; b := 0;
  ELSIF kind = 5 THEN
    b := CASE WHEN amount = -1 THEN -1 ELSE now + amount END;
  ELSIF kind = 1 OR kind = 4 THEN
    -- consume (when not blocked, and only if it fits) or penalty (always): the algorithm's tryConsume and add.
    IF kind = 1 AND b <> 0 THEN
      NULL;
    ELSIF algo = 0 THEN
      IF x IS NULL THEN
        x := 0;
        y := CASE WHEN e1 > now THEN e1 WHEN e2 > now THEN e2 ELSE now + w END;
        fits := kind = 4 OR amount <= l;
        IF NOT fits THEN x := NULL; y := NULL; END IF;
      ELSE
        fits := kind = 4 OR x + amount <= l;
      END IF;
      -- MAX_USAGE (types.ts): a penalty saturates the count at 2^52.
      IF fits THEN x := least(x + amount, 4503599627370496); ELSE ok := false; END IF;
    ELSIF algo = 1 THEN
      IF x IS NULL THEN
        fits := kind = 4 OR coalesce(${name}_wait_v1(0, 0, now - now % w, amount, now, l, w), 1) = 0;
        IF fits THEN x := 0; y := least(amount, 4503599627370496); z := now - now % w; END IF;
      ELSE
        fits := kind = 4 OR coalesce(${name}_wait_v1(x, y, z, amount, now, l, w), 1) = 0;
        IF fits THEN y := least(y + amount, 4503599627370496); END IF;
      END IF;
      IF NOT fits THEN ok := false; END IF;
    ELSIF algo = 2 THEN
      n := coalesce(cardinality(lg), 0);
      IF kind = 4 THEN
        -- limit timestamps at now already refuse everything until now + window (sliding-log.ts add).
        lg := coalesce(lg, '{}') || array_fill(now, ARRAY[least(amount, l)::int]);
      ELSIF n + amount <= l THEN
        lg := coalesce(lg, '{}') || array_fill(now, ARRAY[amount::int]);
      ELSE
        ok := false;
      END IF;
      IF lg = '{}' THEN lg := NULL; END IF;
    ELSE
      -- In double precision, as in JavaScript: a penalty's amount × window may be past bigint; it saturates at 2^52.
      uf := CASE WHEN x IS NOT NULL AND (x - now) * l + y > 0 THEN (x - now) * l + y ELSE (cap - init) * w END::float8 + amount::float8 * w;
      IF kind = 4 OR uf <= (w * cap)::float8 THEN
        units := least(uf, 4503599627370496::float8)::bigint;
        IF units > 0 THEN x := now + units / l; y := units % l; ELSE x := NULL; y := NULL; END IF;
      ELSE
        ok := false;
      END IF;
    END IF;
    IF NOT ok AND blk > 0 THEN b := now + blk; END IF;
  ELSIF kind = 3 THEN
    -- reward: the algorithm's remove.
    IF algo = 0 THEN
      IF x IS NOT NULL THEN x := greatest(0, x - amount); END IF;
    ELSIF algo = 1 THEN
      IF x IS NOT NULL THEN y := greatest(0, y - amount); END IF;
    ELSIF algo = 2 THEN
      IF lg IS NOT NULL THEN
        n := cardinality(lg);
        IF n - amount <= 0 THEN lg := NULL; ELSE lg := lg[1:(n - amount)::int]; END IF;
      END IF;
    ELSE
      uf := CASE WHEN x IS NOT NULL AND (x - now) * l + y > 0 THEN (x - now) * l + y ELSE (cap - init) * w END::float8 - amount::float8 * w;
      IF uf > 0 THEN units := uf::bigint; x := now + units / l; y := units % l; ELSE x := NULL; y := NULL; END IF;
    END IF;
  END IF;

  -- view: remaining, reset, retry (for cost), empty (for one unit).
  IF algo = 3 THEN
    full_units := w * cap;
    units := CASE WHEN x IS NOT NULL AND (x - now) * l + y > 0 THEN (x - now) * l + y ELSE (cap - init) * w END;
    remaining := greatest(0, (full_units - units) / w);
    reset_ms := (units + l - 1) / l;
    retry_ms := (greatest(0, units + cost * w - full_units) + l - 1) / l;
    empty_ms := CASE WHEN remaining >= 1 THEN 0 ELSE (greatest(0, units + w - full_units) + l - 1) / l END;
  ELSIF (algo = 2 AND lg IS NULL) OR (algo <> 2 AND x IS NULL) THEN
    remaining := l; reset_ms := 0; retry_ms := 0; empty_ms := 0;
  ELSIF algo = 0 THEN
    remaining := greatest(0, l - x);
    reset_ms := CASE WHEN x > 0 THEN y - now ELSE 0 END;
    retry_ms := CASE WHEN x + cost <= l THEN 0 ELSE y - now END;
    empty_ms := CASE WHEN remaining >= 1 THEN 0 ELSE y - now END;
  ELSIF algo = 1 THEN
    remaining := greatest(0, l - y - floor((x::float8 * (w - (now - z)) + w - 1) / w))::bigint;
    reset_ms := CASE WHEN y > 0 THEN z + 2 * w - now WHEN x > 0 THEN z + w - now ELSE 0 END;
    retry_ms := coalesce(${name}_wait_v1(x, y, z, cost, now, l, w), -1);
    empty_ms := CASE WHEN remaining >= 1 THEN 0 ELSE coalesce(${name}_wait_v1(x, y, z, 1, now, l, w), -1) END;
  ELSE
    n := cardinality(lg);
    remaining := greatest(0, l - n);
    reset_ms := lg[n] + w - now;
    retry_ms := CASE WHEN n + cost <= l THEN 0 ELSE lg[(n + cost - l)::int] + w - now END;
    empty_ms := CASE WHEN remaining >= 1 THEN 0 ELSE lg[(n - l + 1)::int] + w - now END;
  END IF;

  -- applyOperation's outcome: a blocked key refuses until its block ends (-1 is Infinity).
  IF b <> 0 THEN
    lft := CASE WHEN b = -1 THEN -1 ELSE b - now END;
    allowed := 0;
    remaining := 0;
    reset_ms := CASE WHEN lft = -1 OR reset_ms = -1 THEN -1 ELSE greatest(reset_ms, lft) END;
    retry_ms := lft;
    empty_ms := lft;
  ELSE
    IF kind <> 1 THEN ok := retry_ms = 0; END IF;
    allowed := CASE WHEN ok THEN 1 ELSE 0 END;
    IF ok THEN retry_ms := 0; END IF;
  END IF;

  -- applyOperation's expiresAt: 0 when nothing is left, NULL for a block until unblocked.
  IF b = -1 THEN
    expires := NULL;
  ELSE
    w1 := CASE
      WHEN algo = 2 THEN CASE WHEN lg IS NULL THEN 0 ELSE lg[cardinality(lg)] + w END
      WHEN x IS NULL THEN 0
      WHEN algo = 0 THEN y
      WHEN algo = 1 THEN z + CASE WHEN y > 0 THEN 2 ELSE 1 END * w
      ELSE x + CASE WHEN y > 0 THEN 1 ELSE 0 END
    END;
    expires := greatest(w1, b);
  END IF;
END $fn$;
`;
}
