-- Head of every floodgate script: the arguments, constants and integer helpers that src/algorithms/*.ts also use.
--
-- KEYS[1]    the key's state hash: the algorithm's fields plus b, the block end (src/algorithms/index.ts KeyState)
-- KEYS[2]    sliding log only: the list of unit timestamps, oldest first
-- ARGV[1..3] limit, window ms, block ms of an over-limit consume (0 = none); a calendar window's is
--            'ms:end:nextEnd', the ends of the caller's current and next period (see window_end)
-- ARGV[4]    '1' when every operation carries its own time (the store has a clock); '0' to use Redis TIME
-- ARGV[5..]  the operations in arrival order: opcode, amount (and now, with ARGV[4] = '1')
-- Returns five integers per operation: allowed (1/0), remaining, resetMs, retryAfterMs, emptyMs;
-- -1 stands for Infinity (blocked until unblocked).

-- src/core/calendar-window.ts windowArgument: 'ms', or 'ms:end:nextEnd' for a calendar window (E1, E2; 0 otherwise).
-- A plain number, the common case, skips the pattern match.
local function parse_window(arg)
  local ms = tonumber(arg)
  if ms then return ms, 0, 0 end
  local w, e1, e2 = string.match(arg, '^(%d+):(%d+):(%d+)$')
  if w then return tonumber(w), tonumber(e1), tonumber(e2) end
  return nil, 0, 0
end

local STATE = KEYS[1]
local L = tonumber(ARGV[1])
local W, E1, E2 = parse_window(ARGV[2])
local BLOCK_MS = tonumber(ARGV[3])
local CLIENT_TIME = ARGV[4] == '1'
local FIRST_OP = 5
local STRIDE = CLIENT_TIME and 3 or 2

-- src/core/policy.ts OP_CODE and BLOCK_FOREVER.
local OP_CONSUME, OP_PEEK, OP_REWARD, OP_PENALTY, OP_BLOCK, OP_RESET = 1, 2, 3, 4, 5, 6
local BLOCK_FOREVER = -1
local INF = math.huge

-- With a client clock the TTLs cannot follow that clock (Redis expires keys by its own time), so
-- they only collect garbage and get enough slack that a clock lagging Redis never loses state.
local CLIENT_TIME_MIN_TTL = 60000

-- redis.call turns a Lua number into text with %.14g or %.17g depending on the Redis version, which
-- can round or use exponents for large integers such as timestamps; format integers exactly instead.
local function int(x)
  return string.format('%d', x)
end

-- Where a fixed window opened at now ends (fixed-window.ts windowEnd): W later, or for a calendar window
-- the first of the caller's two period ends after this script's now, so Redis's clock decides which
-- period a window belongs to even when the caller's clock is a little off. A caller a whole period
-- behind sent no end ahead of now; the window then lasts the longest period (W).
local function window_end(now)
  if E1 > now then return E1 end
  if E2 > now then return E2 end
  return now + W
end

-- src/algorithms/types.ts ceilDiv: the same double arithmetic as JavaScript, exact below 2^52.
local function ceil_div(a, b)
  return math.floor((a + b - 1) / b)
end

-- An algorithm's table: its state fields, whether its state is the key's hash, and every member its file
-- defines named here (nil until then), so the table is sized once rather than grown and rehashed member by
-- member: scripts build it on every call.
local function new_impl(fields, in_hash)
  return {
    fields = fields,
    in_hash = in_hash,
    asked = nil,
    decode = nil,
    encode = nil,
    discard = nil,
    normalize = nil,
    try_consume = nil,
    add = nil,
    remove = nil,
    view = nil,
    expires_at = nil,
    finish = nil,
  }
end

-- src/algorithms/types.ts fullView. A view is four values (remaining, reset, retry, empty), not a
-- table: every operation makes one, and a table per view is an allocation per part per call.
local function full_view()
  return L, 0, 0, 0
end

local function encode_ms(x)
  if x == INF then return -1 end
  return x
end

-- Reads a key's state hash: the algorithm's decoded state, the block, whether the hash existed, and
-- the raw reply (the algorithm's fields in order, then b), from which a write tells the fields that are gone.
local function read_state(key, impl)
  -- The names asked for, made once per algorithm instance (a composite reads several keys with one).
  local asked = impl.asked
  if asked == nil then
    asked = { unpack(impl.fields) }
    asked[#asked + 1] = 'b'
    impl.asked = asked
  end
  local n = #asked - 1
  local v = redis.call('HMGET', key, unpack(asked))
  local had_hash = false
  for i = 1, n + 1 do
    if v[i] then
      had_hash = true
      break
    end
  end
  return impl.decode(v), tonumber(v[n + 1]) or 0, had_hash, v
end

-- applyOperation's outcome, appended to out as five integers: allowed (1/0), remaining, resetMs,
-- retryAfterMs, emptyMs. A consume's allowed is its own; any other operation's is whether one unit fits.
-- The view is an algorithm's four values (see full_view).
local function push_outcome(out, consume, allowed, remaining, reset, retry, empty, b, now)
  local n = #out
  if b ~= 0 then
    local block_left = INF
    if b ~= BLOCK_FOREVER then block_left = b - now end
    out[n + 1] = 0
    out[n + 2] = 0
    out[n + 3] = encode_ms(math.max(reset, block_left))
    out[n + 4] = encode_ms(block_left)
    out[n + 5] = encode_ms(block_left)
  else
    if not consume then allowed = retry == 0 end
    out[n + 1] = allowed and 1 or 0
    out[n + 2] = remaining
    out[n + 3] = reset
    out[n + 4] = allowed and 0 or retry
    out[n + 5] = empty
  end
end

-- The fields of a state hash, as read_state's raw reply shows them, that a write of (a, b) leaves stale:
-- a write names every field of a present state, so only an ended state's fields and an ended block's b go.
local function stale_fields(impl, raw, a, b)
  local gone
  local fields = impl.fields
  local n = #fields
  if a == nil then
    for i = 1, n do
      if raw[i] then
        gone = gone or {}
        gone[#gone + 1] = fields[i]
      end
    end
  end
  if b == 0 and raw[n + 1] then
    gone = gone or {}
    gone[#gone + 1] = 'b'
  end
  return gone
end

-- The absolute time after which a key's state (algorithm state a, block b) may be dropped; nil for
-- never (a block until unblocked) and for a state whose algorithm keeps its own TTL (the sliding log's list).
local function state_expiry(impl, a, b)
  if b == BLOCK_FOREVER then return nil end
  local at = b
  if a ~= nil and impl.in_hash then at = math.max(impl.expires_at(a), b) end
  return at
end

local function expire(key, ttl)
  if CLIENT_TIME and ttl < CLIENT_TIME_MIN_TTL then ttl = CLIENT_TIME_MIN_TTL end
  if ttl < 1 then ttl = 1 end
  redis.call('PEXPIRE', key, int(ttl))
end

-- Writes a key's final state (a, b) once, with applyOperation's expiresAt as the TTL; a0 and b0 are the
-- state as read, raw the hash as read_state found it. The sliding log's list is written by its algorithm;
-- its hash then holds only the block.
local function write_state(key, impl, a, b, a0, b0, had_hash, raw, now)
  local fields
  if a ~= nil then fields = impl.encode(a) end
  if b ~= 0 then
    fields = fields or {}
    fields[#fields + 1] = 'b'
    fields[#fields + 1] = int(b)
  end
  if fields == nil or #fields == 0 then
    if had_hash then redis.call('DEL', key) end
    return
  end
  redis.call('HSET', key, unpack(fields))
  -- A state that shrank (a block that ended, an algorithm state gone) loses those fields; overwriting the
  -- rest in place spares the DEL that every write would otherwise need.
  local gone = stale_fields(impl, raw, a, b)
  if gone then redis.call('HDEL', key, unpack(gone)) end
  -- Written in place, the hash keeps its old TTL: a block until unblocked must lose it.
  if b == BLOCK_FOREVER then
    if had_hash then redis.call('PERSIST', key) end
    return
  end
  local expires_at = state_expiry(impl, a, b)
  -- The same expiry as the TTL already set (a fixed window counting within its window): no PEXPIRE.
  -- With a client clock the TTL was stretched to a minimum, so it is set again.
  if had_hash and not gone and not CLIENT_TIME and expires_at == state_expiry(impl, a0, b0) then return end
  expire(key, expires_at - now)
end

local server_now = 0
if not CLIENT_TIME then
  -- Redis before 5 replicates scripts verbatim and refuses writes after TIME unless told otherwise.
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  server_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
