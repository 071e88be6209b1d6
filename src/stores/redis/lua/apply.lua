-- Tail of every floodgate script: src/algorithms/index.ts applyOperation over a batch of operations, then one write.

-- The key's whole state, as applyOperation's KeyState: a (algorithm state or nil) and b (block);
-- a0 and b0 as the script found them.
local a, b
local a0, b0
-- Whether the state hash existed when the script began: a hash that never existed needs no DEL.
local had_hash = false

-- The hash's fields that held a value: a write overwrites fields in place and removes only these that are gone.
local present = {}

local function load_state()
  local fields = impl.fields
  local v = redis.call('HMGET', STATE, 'b', unpack(fields))
  for i = 1, #fields + 1 do
    if v[i] then
      had_hash = true
      present[#present + 1] = (i == 1) and 'b' or fields[i - 1]
    end
  end
  b = tonumber(v[1]) or 0
  table.remove(v, 1)
  a = impl.decode(v)
end

local function encode_ms(x)
  if x == INF then return -1 end
  return x
end

-- applyOperation: updates a and b, and appends the outcome's five integers to out.
local function apply_operation(kind, amount, now, out)
  a = impl.normalize(a, now)
  if b > 0 and b <= now then b = 0 end
  local allowed = true
  local cost = 1
  if kind == OP_CONSUME then cost = amount end

  if kind == OP_RESET then
    impl.discard(a)
    a = nil
    b = 0
  elseif kind == OP_BLOCK then
    if amount == BLOCK_FOREVER then b = BLOCK_FOREVER else b = now + amount end
  elseif kind == OP_REWARD then
    a = impl.remove(a, amount, now)
  elseif kind == OP_PENALTY then
    a = impl.add(a, amount, now)
  elseif kind == OP_CONSUME then
    if b == 0 then
      local nxt = impl.try_consume(a, amount, now)
      if nxt == nil then
        allowed = false
        if BLOCK_MS > 0 then b = now + BLOCK_MS end
      else
        a = nxt
      end
    end
  elseif kind ~= OP_PEEK then
    return redis.error_reply('floodgate: unknown operation code ' .. tostring(kind))
  end

  local view = impl.view(a, cost, now)
  local n = #out
  if b ~= 0 then
    local block_left = INF
    if b ~= BLOCK_FOREVER then block_left = b - now end
    out[n + 1] = 0
    out[n + 2] = 0
    out[n + 3] = encode_ms(math.max(view.reset, block_left))
    out[n + 4] = encode_ms(block_left)
    out[n + 5] = encode_ms(block_left)
  else
    if kind ~= OP_CONSUME then allowed = view.retry == 0 end
    out[n + 1] = allowed and 1 or 0
    out[n + 2] = view.remaining
    out[n + 3] = view.reset
    out[n + 4] = allowed and 0 or view.retry
    out[n + 5] = view.empty
  end
end

-- Writes the final state once, with applyOperation's expiresAt as the TTL. The sliding log's
-- list is already written; its hash then holds only the block.
local function persist(now)
  local fields = {}
  if a ~= nil then fields = impl.encode(a) end
  if b ~= 0 then
    fields[#fields + 1] = 'b'
    fields[#fields + 1] = int(b)
  end
  if #fields == 0 then
    if had_hash then redis.call('DEL', STATE) end
    return
  end
  redis.call('HSET', STATE, unpack(fields))
  -- A state that shrank (a block that ended, an algorithm state gone) loses those fields; overwriting the
  -- rest in place spares the DEL that every write would otherwise need.
  local gone = stale_fields(present, fields)
  if #gone > 0 then redis.call('HDEL', STATE, unpack(gone)) end
  -- Written in place, the hash keeps its old TTL: a block until unblocked must lose it.
  if b == BLOCK_FOREVER then
    if had_hash then redis.call('PERSIST', STATE) end
    return
  end
  local expires_at = state_expiry(impl, a, b)
  -- The same expiry as the TTL already set (a fixed window counting within its window): no PEXPIRE.
  -- With a client clock the TTL was stretched to a minimum, so it is set again.
  if had_hash and #gone == 0 and not CLIENT_TIME and expires_at == state_expiry(impl, a0, b0) then return end
  expire(STATE, expires_at - now)
end

load_state()
a0, b0 = a, b
local out = {}
local now = server_now
for i = FIRST_OP, #ARGV, STRIDE do
  if CLIENT_TIME then now = tonumber(ARGV[i + 2]) end
  local failed = apply_operation(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), now, out)
  if failed then return failed end
end
-- Algorithms hand back the very table they were given when nothing changed, so an
-- unchanged identity means there is nothing to write (peeks and refused consumes).
if a ~= a0 or b ~= b0 then persist(now) end
-- Work an algorithm defers to the end of the batch (the sliding log's TTL).
if impl.finish then impl.finish(now) end
return out
