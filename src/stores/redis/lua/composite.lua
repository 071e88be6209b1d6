-- Tail of the composite script: src/algorithms/composite.ts applyComposite over several keys, each with its own algorithm, all or nothing.
--
-- KEYS[2i-1]  part i's state hash; KEYS[2i] its sliding-log list (declared for every part, so every key a part may touch is in KEYS)
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

local function use(p)
  L, W, BLOCK_MS = p.limit, p.window, p.block
  E1, E2 = p.end1, p.end2
end

-- Reads a part's state and normalizes it, as applyOperation begins; keeps what was read to tell a change.
local function load_part(p)
  use(p)
  local a, b
  a, b, p.had_hash, p.raw = read_state(p.state, p.impl)
  p.a0, p.b0 = a, b
  p.a = p.impl.normalize(a, now)
  if b > 0 and b <= now then b = 0 end
  p.b = b
end

-- Whether the part's consume would be admitted, without spending: the sliding log's try_consume
-- pushes to its list, so its test is the same comparison made without the push.
local function fits(p)
  use(p)
  if p.b ~= 0 then return false end
  if p.sliding_log then return ((p.a and p.a.n) or 0) + p.cost <= L end
  -- Kept for the second phase, which would compute the same state again.
  p.next = p.impl.try_consume(p.a, p.cost, now)
  return p.next ~= nil
end

-- applyOperation's consume or peek on an already loaded part; appends the outcome's five integers to out.
local function step(p, consume, out)
  use(p)
  local a, b = p.a, p.b
  local allowed = true
  local cost = 1
  if consume then
    cost = p.cost
    if b == 0 then
      local nxt = p.next
      if p.sliding_log then nxt = p.impl.try_consume(a, cost, now) end
      if nxt == nil then
        allowed = false
        if BLOCK_MS > 0 then b = now + BLOCK_MS end
      else
        a = nxt
      end
    end
  end
  p.a, p.b = a, b
  push_outcome(out, consume, allowed, p.impl.view(a, cost, now), b, now)
end

-- The part's write (see write_state), then the algorithm's deferred work (the sliding log's TTL).
local function persist(p)
  use(p)
  if p.a ~= p.a0 or p.b ~= p.b0 then write_state(p.state, p.impl, p.a, p.b, p.a0, p.b0, p.had_hash, p.raw, now) end
  if p.impl.finish then p.impl.finish(now) end
end

local parts = {}
local shared = {}
local count = (#ARGV - FIRST_PART + 1) / PART_WIDTH
for i = 1, count do
  local j = FIRST_PART + (i - 1) * PART_WIDTH
  local make = MAKERS[ARGV[j]]
  if make == nil then return redis.error_reply('floodgate: unknown algorithm ' .. tostring(ARGV[j])) end
  local p = {
    state = KEYS[2 * i - 1],
    limit = tonumber(ARGV[j + 1]),
    block = tonumber(ARGV[j + 3]),
    cost = tonumber(ARGV[j + 4]),
    sliding_log = ARGV[j] == 'sliding-log',
  }
  p.window, p.end1, p.end2 = parse_window(ARGV[j + 2])
  -- The sliding log gets an instance per part (it keeps its list's name and a read cache per key); the
  -- other algorithms read only the policy locals, so one instance per algorithm serves every part.
  if p.sliding_log then
    p.impl = make({ KEYS[2 * i - 1], KEYS[2 * i] })
  else
    shared[ARGV[j]] = shared[ARGV[j]] or make({})
    p.impl = shared[ARGV[j]]
  end
  parts[i] = p
end

-- Phase 1: decide without writing.
local all = true
for i = 1, count do
  local p = parts[i]
  load_part(p)
  p.fits = fits(p)
  if not p.fits then all = false end
end

-- Phase 2: every part spends, or only the refusing parts change (their block); the others report a peek.
local out = {}
for i = 1, count do
  local p = parts[i]
  if all or not p.fits then
    step(p, true, out)
    persist(p)
  else
    step(p, false, out)
  end
end
return out
