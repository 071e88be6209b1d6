-- Tail of the composite script: src/algorithms/composite.ts applyComposite over several keys, each with its own algorithm, all or nothing.
--
-- KEYS        each part's state hash in order, a sliding-log part's list right after its hash (every key a
--             part may touch is in KEYS; the other algorithms have no list, so none is sent for them)
-- ARGV[1..3]  unused ('0'): each part brings its own limit, window and block
-- ARGV[4]     '1' when ARGV[5] carries the time (the store has a clock); '0' to use Redis TIME
-- ARGV[5]     the time with ARGV[4] = '1', else '0'
-- ARGV[6..]   five values per part: algorithm name, limit (with a token bucket's burst and initial
--             tokens, as in prelude.lua), window ms (with a calendar window's ends, as in prelude.lua),
--             block ms, cost
-- Returns five integers per part, encoded as apply.lua does.
--
-- The prelude's L, B, I, W, E1, E2 and BLOCK_MS are reassigned before each part's algorithm runs: the algorithm
-- functions close over those locals, so they always see the current part's policy.

local FIRST_PART = 6
local PART_WIDTH = 5
local MAKERS = {
  ['fixed-window'] = make_fixed_window,
  ['sliding-window'] = make_sliding_window,
  ['sliding-log'] = make_sliding_log,
  ['token-bucket'] = make_token_bucket,
}

local now = server_now
if CLIENT_TIME then now = tonumber(ARGV[5]) end

-- The algorithms other than the sliding log read only the policy locals, so one instance per
-- algorithm serves every part; made on first use, since making one creates a dozen closures.
local NO_KEYS = {}
local shared = {}
-- The KEYS index of the next part's state hash.
local next_key = 1

-- A loaded part is one array, made by one constructor (sized once, no per-field growth), at these indexes:
--   1 algorithm, 2 state key, 3..7 its policy (limit, window, calendar ends, block), 8 cost,
--   9..12 the state as read (x0, y0, z0, b0), 13..16 normalized (x, y, z, b), 17 read_state's had_hash,
--   18 its raw reply, 19 whether it is a sliding log, 20..22 the state its consume would leave (nil when
--   refused; not for the sliding log, whose try_consume pushes to its list, so it runs only when the
--   part spends), 23 whether it would be admitted, 24..25 the token bucket's burst and initial tokens.
-- The indexes are literals, and both phases run in the chunk itself rather than in functions: a closure
-- made on every call captures each upvalue it names, which cost more than the work here (about 1 µs).

-- Phase 1: read every part, normalized as applyOperation begins, and decide, without writing.
local count = (#ARGV - FIRST_PART + 1) / PART_WIDTH
local parts = {}
local all = true
for i = 1, count do
  local j = FIRST_PART + (i - 1) * PART_WIDTH
  local name = ARGV[j]
  local make = MAKERS[name]
  if make == nil then return redis.error_reply('floodgate: unknown algorithm ' .. tostring(name)) end
  local key = KEYS[next_key]
  next_key = next_key + 1
  local impl
  local log = name == 'sliding-log'
  if log then
    -- The sliding log gets an instance per part: it keeps its list's name and a read cache per key.
    impl = make({ key, KEYS[next_key] })
    next_key = next_key + 1
  else
    impl = shared[name]
    if impl == nil then
      impl = make(NO_KEYS)
      shared[name] = impl
    end
  end
  L, B, I = parse_limit(ARGV[j + 1])
  W, E1, E2 = parse_window(ARGV[j + 2])
  BLOCK_MS = tonumber(ARGV[j + 3])
  local cost = tonumber(ARGV[j + 4])
  local x0, y0, z0, b0, had_hash, raw = read_state(key, impl)
  local x, y, z = impl.normalize(x0, y0, z0, now)
  local b = b0
  if b > 0 and b <= now then b = 0 end
  local fits = false
  local nx, ny, nz
  if b == 0 then
    if log then
      fits = (x or 0) + cost <= L
    else
      nx, ny, nz = impl.try_consume(x, y, z, cost, now)
      fits = nx ~= nil
    end
  end
  if not fits then all = false end
  parts[i] = {
    impl, key, L, W, E1, E2, BLOCK_MS, cost,
    x0, y0, z0, b0, x, y, z, b,
    had_hash, raw, log, nx, ny, nz, fits, B, I,
  }
end

-- Phase 2: every part spends, or only the refusing parts change (their block); the others report a peek.
-- A spending part then writes its state (see write_state) and does its algorithm's deferred work (the
-- sliding log's TTL).
local out = {}
for i = 1, count do
  local p = parts[i]
  local spend = all or not p[23]
  local impl = p[1]
  L, W, E1, E2, BLOCK_MS = p[3], p[4], p[5], p[6], p[7]
  B, I = p[24], p[25]
  local x, y, z, b = p[13], p[14], p[15], p[16]
  local allowed = true
  local cost = 1
  if spend then
    cost = p[8]
    if b == 0 then
      local nx, ny, nz = p[20], p[21], p[22]
      if p[19] then nx, ny, nz = impl.try_consume(x, y, z, cost, now) end
      if nx == nil then
        allowed = false
        if BLOCK_MS > 0 then b = now + BLOCK_MS end
      else
        x, y, z = nx, ny, nz
      end
    end
  end
  local remaining, reset, retry, empty = impl.view(x, y, z, cost, now)
  push_outcome(out, spend, allowed, remaining, reset, retry, empty, b, now)
  if spend then
    local x0, y0, z0, b0 = p[9], p[10], p[11], p[12]
    if x ~= x0 or y ~= y0 or z ~= z0 or b ~= b0 then
      write_state(p[2], impl, x, y, z, b, x0, y0, z0, b0, p[17], p[18], now)
    end
    if impl.finish then impl.finish(now) end
  end
end
return out
