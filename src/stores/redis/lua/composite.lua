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

local function use(p)
  L, W, BLOCK_MS = p.limit, p.window, p.block
  E1, E2 = p.end1, p.end2
end

-- The algorithms other than the sliding log read only the policy locals, so one instance per
-- algorithm serves every part; made on first use, since making one creates a dozen closures.
local NO_KEYS = {}
local shared = {}
-- The KEYS index of the next part's state hash.
local next_key = 1

-- Part i: its policy, read and normalized as applyOperation begins, and whether its consume would be
-- admitted (the second value). Every field is named in the constructor, so the table is sized once (a
-- field added later grows and rehashes it), and there are 16, the most one size holds; a0 and b0 keep
-- the state as read, to tell a change.
local function load_part(i)
  local j = FIRST_PART + (i - 1) * PART_WIDTH
  local name = ARGV[j]
  local make = MAKERS[name]
  if make == nil then return nil end
  local window, end1, end2 = parse_window(ARGV[j + 2])
  local p = {
    state = KEYS[next_key],
    impl = nil,
    limit = tonumber(ARGV[j + 1]),
    window = window,
    end1 = end1,
    end2 = end2,
    block = tonumber(ARGV[j + 3]),
    cost = tonumber(ARGV[j + 4]),
    sliding_log = name == 'sliding-log',
    a = nil,
    b = 0,
    a0 = nil,
    b0 = 0,
    had_hash = false,
    raw = nil,
    next = nil,
  }
  -- The sliding log gets an instance per part: it keeps its list's name and a read cache per key.
  next_key = next_key + 1
  if p.sliding_log then
    p.impl = make({ p.state, KEYS[next_key] })
    next_key = next_key + 1
  else
    local impl = shared[name]
    if impl == nil then
      impl = make(NO_KEYS)
      shared[name] = impl
    end
    p.impl = impl
  end
  use(p)
  local a, b
  a, b, p.had_hash, p.raw = read_state(p.state, p.impl)
  p.a0, p.b0 = a, b
  a = p.impl.normalize(a, now)
  if b > 0 and b <= now then b = 0 end
  p.a, p.b = a, b
  -- Whether the consume fits, without spending: the sliding log's try_consume pushes to its list, so
  -- its test is the same comparison made without the push. The others' next state is kept for phase 2.
  if b ~= 0 then return p, false end
  if p.sliding_log then return p, ((a and a.n) or 0) + p.cost <= L end
  p.next = p.impl.try_consume(a, p.cost, now)
  return p, p.next ~= nil
end

-- applyOperation's consume or peek on a loaded part; appends the outcome's five integers to out.
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
  local remaining, reset, retry, empty = p.impl.view(a, cost, now)
  push_outcome(out, consume, allowed, remaining, reset, retry, empty, b, now)
end

-- The part's write (see write_state), then the algorithm's deferred work (the sliding log's TTL).
local function persist(p)
  if p.a ~= p.a0 or p.b ~= p.b0 then write_state(p.state, p.impl, p.a, p.b, p.a0, p.b0, p.had_hash, p.raw, now) end
  if p.impl.finish then p.impl.finish(now) end
end

-- Phase 1: read every part and decide, without writing.
local parts = {}
local fits = {}
local count = (#ARGV - FIRST_PART + 1) / PART_WIDTH
local all = true
for i = 1, count do
  local p, admits = load_part(i)
  if p == nil then
    local name = ARGV[FIRST_PART + (i - 1) * PART_WIDTH]
    return redis.error_reply('floodgate: unknown algorithm ' .. tostring(name))
  end
  parts[i] = p
  fits[i] = admits
  if not admits then all = false end
end

-- Phase 2: every part spends, or only the refusing parts change (their block); the others report a
-- peek. The policy locals still hold the part's own from step, which persist's write reads.
local out = {}
for i = 1, count do
  local p = parts[i]
  if all or not fits[i] then
    step(p, true, out)
    persist(p)
  else
    step(p, false, out)
  end
end
return out
