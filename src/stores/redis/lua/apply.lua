-- Tail of every floodgate script: src/algorithms/index.ts applyOperation over a batch of operations, then one write.

-- The key's whole state, as applyOperation's KeyState: x, y, z (algorithm state, x == nil for none) and
-- b (block), as read_state found them (x0, y0, z0, b0) and after each operation; had_hash and raw as
-- read_state tells them.
local x0, y0, z0, b0, had_hash, raw = read_state(STATE, impl)
local x, y, z, b = x0, y0, z0, b0
local out = {}
local now = server_now
-- applyOperation for each operation, appending the outcome's five integers to out. It runs in the chunk
-- itself, not in a function: a closure made on every call captures each upvalue it names.
for i = FIRST_OP, #ARGV, STRIDE do
  if CLIENT_TIME then now = tonumber(ARGV[i + 2]) end
  local kind, amount = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  x, y, z = impl.normalize(x, y, z, now)
  if b > 0 and b <= now then b = 0 end
  local allowed = true
  local cost = 1
  if kind == OP_CONSUME then
    cost = amount
    if b == 0 then
      local nx, ny, nz = impl.try_consume(x, y, z, amount, now)
      if nx == nil then
        allowed = false
        if BLOCK_MS > 0 then b = now + BLOCK_MS end
      else
        x, y, z = nx, ny, nz
      end
    end
  elseif kind == OP_RESET then
    impl.discard(x, y, z)
    x, y, z = nil, nil, nil
    b = 0
  elseif kind == OP_BLOCK then
    if amount == BLOCK_FOREVER then b = BLOCK_FOREVER else b = now + amount end
  elseif kind == OP_REWARD then
    x, y, z = impl.remove(x, y, z, amount, now)
  elseif kind == OP_PENALTY then
    x, y, z = impl.add(x, y, z, amount, now)
  elseif kind ~= OP_PEEK then
    return redis.error_reply('floodgate: unknown operation code ' .. tostring(kind))
  end
  local remaining, reset, retry, empty = impl.view(x, y, z, cost, now)
  push_outcome(out, kind == OP_CONSUME, allowed, remaining, reset, retry, empty, b, now)
end
-- A state equal to the one read (peeks, refused consumes) needs no write.
if x ~= x0 or y ~= y0 or z ~= z0 or b ~= b0 then write_state(STATE, impl, x, y, z, b, x0, y0, z0, b0, had_hash, raw, now) end
-- Work an algorithm defers to the end of the batch (the sliding log's TTL).
if impl.finish then impl.finish(now) end
return out
