-- Tail of every floodgate script: src/algorithms/index.ts applyOperation over a batch of operations, then one write.

-- The key's whole state, as applyOperation's KeyState: a (algorithm state or nil) and b (block);
-- a0 and b0 as the script found them.
local a, b
local a0, b0
-- Whether the state hash existed, and its fields as read (see read_state).
local had_hash, raw

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

  local remaining, reset, retry, empty = impl.view(a, cost, now)
  push_outcome(out, kind == OP_CONSUME, allowed, remaining, reset, retry, empty, b, now)
end

a, b, had_hash, raw = read_state(STATE, impl)
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
if a ~= a0 or b ~= b0 then write_state(STATE, impl, a, b, a0, b0, had_hash, raw, now) end
-- Work an algorithm defers to the end of the batch (the sliding log's TTL).
if impl.finish then impl.finish(now) end
return out
