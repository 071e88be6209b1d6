-- Head of every floodgate script: the arguments, constants and integer helpers that src/algorithms/*.ts also use.
--
-- KEYS[1]    the key's state hash: the algorithm's fields plus b, the block end (src/algorithms/index.ts KeyState)
-- KEYS[2]    sliding log only: the list of unit timestamps, oldest first
-- ARGV[1..3] limit, window ms, block ms of an over-limit consume (0 = none); a calendar window's is
--            'ms:end:nextEnd', the ends of the caller's current and next period (see window_end); a token
--            bucket's limit with a burst or initial tokens is 'limit:burst:initialTokens' (see parse_limit)
-- ARGV[4]    '1' when every operation carries its own time (the store has a clock); '0' to use Redis TIME
-- ARGV[5..]  the operations in arrival order: opcode, amount (and now, with ARGV[4] = '1')
-- Returns five integers per operation: allowed (1/0), remaining, resetMs, retryAfterMs, emptyMs;
-- -1 stands for Infinity (blocked until unblocked).

-- src/algorithms/types.ts MAX_USAGE: a penalty saturates a state's usage at 2^52, so it stays an exact integer.
local MAX_USAGE = 4503599627370496

-- src/core/calendar-window.ts windowArgument: 'ms', or 'ms:end:nextEnd' for a calendar window (E1, E2; 0 otherwise).
-- A plain number, the common case, skips the pattern match.
local function parse_window(arg)
  local ms = tonumber(arg)
  if ms then return ms, 0, 0 end
  local w, e1, e2 = string.match(arg, '^(%d+):(%d+):(%d+)$')
  if w then return tonumber(w), tonumber(e1), tonumber(e2) end
  return nil, 0, 0
end

-- src/core/policy.ts limitArgument: 'limit', or 'limit:burst:initialTokens' for a token bucket (B, I; both L otherwise).
local function parse_limit(arg)
  local l = tonumber(arg)
  if l then return l, l, l end
  local a, b, i = string.match(arg, '^(%d+):(%d+):(%d+)$')
  if a then return tonumber(a), tonumber(b), tonumber(i) end
  return nil, 0, 0
end

local STATE = KEYS[1]
local L, B, I = parse_limit(ARGV[1])
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

-- An algorithm is a table of functions on plain values (built once per script call): a key's algorithm
-- state is up to three numbers x, y, z, with x == nil for no state, passed and returned as multiple
-- values, so an operation allocates no state table. Its members:
--   n, asked     the number of state fields in the hash, and their names followed by 'b' (read_state's HMGET)
--   in_hash      whether the state is the hash's fields (the sliding log keeps a list instead)
--   decode(v)    the state from the HMGET reply
--   normalize(x, y, z, now), try_consume(x, y, z, cost, now) (nil when refused), add/remove(x, y, z, amount, now)
--                the next state; view(x, y, z, cost, now) four values (see full_view); expires_at(x, y, z);
--   discard(x, y, z) and finish(now) (or nil) for the sliding log's list.

-- src/algorithms/types.ts fullView. A view is four values (remaining, reset, retry, empty), not a
-- table: every operation makes one, and a table per view is an allocation per part per call.
local function full_view()
  return L, 0, 0, 0
end

local function encode_ms(x)
  if x == INF then return -1 end
  return x
end

-- Reads a key's state hash: the algorithm's state (x, y, z), the block, whether the hash existed, and
-- the raw reply (the algorithm's fields in order, then b), from which a write tells the fields that are gone.
local function read_state(key, impl)
  local v = redis.call('HMGET', key, unpack(impl.asked))
  local nb = impl.n + 1
  local had_hash = false
  for i = 1, nb do
    if v[i] then
      had_hash = true
      break
    end
  end
  local x, y, z = impl.decode(v)
  return x, y, z, tonumber(v[nb]) or 0, had_hash, v
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

-- The absolute time after which a key's state (algorithm state x, y, z, block b) may be dropped; nil for
-- never (a block until unblocked). A state whose algorithm keeps its own TTL (the sliding log's list) adds nothing.
local function state_expiry(impl, x, y, z, b)
  if b == BLOCK_FOREVER then return nil end
  if x ~= nil and impl.in_hash then return math.max(impl.expires_at(x, y, z), b) end
  return b
end

local function expire(key, ttl)
  if CLIENT_TIME and ttl < CLIENT_TIME_MIN_TTL then ttl = CLIENT_TIME_MIN_TTL end
  if ttl < 1 then ttl = 1 end
  redis.call('PEXPIRE', key, int(ttl))
end

-- Writes a key's final state (x, y, z, b) once, with applyOperation's expiresAt as the TTL; x0, y0, z0
-- and b0 are the state as read, raw the hash as read_state found it. One HSET names every field of a
-- present state (no table is built for it); the sliding log's list is written by its algorithm, its hash
-- then holds only the block.
local function write_state(key, impl, x, y, z, b, x0, y0, z0, b0, had_hash, raw, now)
  local names = impl.asked
  local n = impl.n
  if x ~= nil and n > 0 then
    if n == 2 then
      if b ~= 0 then
        redis.call('HSET', key, names[1], int(x), names[2], int(y), 'b', int(b))
      else
        redis.call('HSET', key, names[1], int(x), names[2], int(y))
      end
    elseif b ~= 0 then
      redis.call('HSET', key, names[1], int(x), names[2], int(y), names[3], int(z), 'b', int(b))
    else
      redis.call('HSET', key, names[1], int(x), names[2], int(y), names[3], int(z))
    end
  elseif b ~= 0 then
    redis.call('HSET', key, 'b', int(b))
  else
    if had_hash then redis.call('DEL', key) end
    return
  end
  -- A state that shrank (a block that ended, an algorithm state gone) loses those fields; overwriting the
  -- rest in place spares the DEL that every write would otherwise need. A write names every field of a
  -- present state, so only an ended state's fields and an ended block's b go.
  local gone
  if x == nil then
    for i = 1, n do
      if raw[i] then
        gone = gone or {}
        gone[#gone + 1] = names[i]
      end
    end
  end
  if b == 0 and raw[n + 1] then
    gone = gone or {}
    gone[#gone + 1] = 'b'
  end
  if gone then redis.call('HDEL', key, unpack(gone)) end
  -- Written in place, the hash keeps its old TTL: a block until unblocked must lose it.
  if b == BLOCK_FOREVER then
    if had_hash then redis.call('PERSIST', key) end
    return
  end
  local expires_at = state_expiry(impl, x, y, z, b)
  -- The same expiry as the TTL already set (a fixed window counting within its window): no PEXPIRE.
  -- With a client clock the TTL was stretched to a minimum, so it is set again.
  if had_hash and not gone and not CLIENT_TIME and expires_at == state_expiry(impl, x0, y0, z0, b0) then return end
  expire(key, expires_at - now)
end

local server_now = 0
if not CLIENT_TIME then
  -- Redis before 5 replicates scripts verbatim and refuses writes after TIME unless told otherwise.
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  server_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
