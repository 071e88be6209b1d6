-- Acquire: takes a slot for an owner while fewer than the limit are held (an owner already holding one has it extended).
-- ARGV[3] limit, ARGV[4] owner id, ARGV[5] ttl ms.
-- Returns {admitted (1/0), slots in use after the call, ms until the earliest slot expires when refused (else 0)}.

local limit = tonumber(ARGV[3])
local owner = ARGV[4]
local ttl = tonumber(ARGV[5])
-- Expired slots go first: only unexpired ones count (an emptied set is deleted by Redis).
redis.call('ZREMRANGEBYSCORE', SLOTS, '-inf', int(now))
local count = redis.call('ZCARD', SLOTS)
local mine = count > 0 and redis.call('ZSCORE', SLOTS, owner)
if mine or count < limit then
  redis.call('ZADD', SLOTS, int(now + ttl), owner)
  if not mine then count = count + 1 end
  outlive(ttl)
  return { 1, count, 0 }
end
local first = redis.call('ZRANGE', SLOTS, 0, 0, 'WITHSCORES')
return { 0, count, tonumber(first[2]) - now }
