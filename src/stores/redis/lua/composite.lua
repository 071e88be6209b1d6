-- Tail of the composite script: src/algorithms/composite.ts applyComposite over several keys, each with its own algorithm, all or nothing.
--
-- KEYS        each part's state hash in order, a sliding-log part's list right after its hash (every key a
--             part may touch is in KEYS; the other algorithms have no list, so none is sent for them)
-- ARGV[1..3]  unused ('0'): each part brings its own limit, window and block
-- ARGV[4]     '1' when ARGV[5] carries the time (the store has a clock); '0' to use Redis TIME
-- ARGV[5]     the time with ARGV[4] = '1', else '0'
-- ARGV[6..]   five values per part: algorithm name, limit, window ms (with a calendar window's ends, as
--             in prelude.lua), block ms, cost
-- Returns five integers per part, encoded as apply.lua does.
--
-- The prelude's L, W, E1, E2 and BLOCK_MS are reassigned before each part's algorithm runs: the algorithm
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

-- A loaded part is one array, made by one constructor (sized once, no per-field growth), at these
-- indexes: its algorithm and state key, its policy (limit, window, calendar ends, block) and cost, the
-- state as read (x0, y0, z0, b0) and normalized (x, y, z, b), read_state's had_hash and raw reply, whether
-- it is a sliding log, and the state its consume would leave (nil when refused; not for the sliding log,
-- whose try_consume pushes to its list, so it runs only when the part spends), and whether it would be admitted.
local P_IMPL, P_KEY, P_LIMIT, P_WINDOW, P_END1, P_END2, P_BLOCK, P_COST = 1, 2, 3, 4, 5, 6, 7, 8
local P_X0, P_Y0, P_Z0, P_B0, P_X, P_Y, P_Z, P_B = 9, 10, 11, 12, 13, 14, 15, 16
local P_HAD, P_RAW, P_LOG, P_NX, P_NY, P_NZ, P_FITS = 17, 18, 19, 20, 21, 22, 23

-- Part i, read and normalized as applyOperation begins, and whether its consume would be admitted.
-- Sets the prelude's policy locals to the part's own.
local function load_part(i)
  local j = FIRST_PART + (i - 1) * PART_WIDTH
  local name = ARGV[j]
  local make = MAKERS[name]
  if make == nil then return nil end
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
  L = tonumber(ARGV[j + 1])
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
  return {
    impl, key, L, W, E1, E2, BLOCK_MS, cost,
    x0, y0, z0, b0, x, y, z, b,
    had_hash, raw, log, nx, ny, nz, fits,
  }, fits
end

-- applyOperation's consume (spend) or peek on a loaded part, appending the outcome's five integers to out;
-- a consume then writes the part's state (see write_state) and does the algorithm's deferred work (the
-- sliding log's TTL).
local function finish_part(p, spend, out)
  local impl = p[P_IMPL]
  L, W, E1, E2, BLOCK_MS = p[P_LIMIT], p[P_WINDOW], p[P_END1], p[P_END2], p[P_BLOCK]
  local x, y, z, b = p[P_X], p[P_Y], p[P_Z], p[P_B]
  local allowed = true
  local cost = 1
  if spend then
    cost = p[P_COST]
    if b == 0 then
      local nx, ny, nz = p[P_NX], p[P_NY], p[P_NZ]
      if p[P_LOG] then nx, ny, nz = impl.try_consume(x, y, z, cost, now) end
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
  if not spend then return end
  local x0, y0, z0, b0 = p[P_X0], p[P_Y0], p[P_Z0], p[P_B0]
  if x ~= x0 or y ~= y0 or z ~= z0 or b ~= b0 then
    write_state(p[P_KEY], impl, x, y, z, b, x0, y0, z0, b0, p[P_HAD], p[P_RAW], now)
  end
  if impl.finish then impl.finish(now) end
end

-- Phase 1: read every part and decide, without writing.
local count = (#ARGV - FIRST_PART + 1) / PART_WIDTH
local parts = {}
local all = true
for i = 1, count do
  local p, fits = load_part(i)
  if p == nil then
    local name = ARGV[FIRST_PART + (i - 1) * PART_WIDTH]
    return redis.error_reply('floodgate: unknown algorithm ' .. tostring(name))
  end
  parts[i] = p
  if not fits then all = false end
end

-- Phase 2: every part spends, or only the refusing parts change (their block); the others report a peek.
local out = {}
for i = 1, count do
  local p = parts[i]
  finish_part(p, all or not p[P_FITS], out)
end
return out
