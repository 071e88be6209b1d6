-- Acquire: takes a slot for an owner while fewer than the limit are held (an owner already holding one has it extended).
-- ARGV[3] limit, ARGV[4] owner id, ARGV[5] ttl ms.
-- Returns {admitted (1/0), slots in use after the call, ms until the earliest slot expires when refused (else 0)}.

local limit = tonumber(ARGV[3])
local owner = ARGV[4]
local ttl = tonumber(ARGV[5])
-- Expired slots go first: only unexpired ones count (an emptied set is deleted by Redis).
redis.call('ZREMRANGEBYSCORE', SLOTS, '-inf', int(now))
local count = redis.call('ZCARD', SLOTS)
-- ZADD answers 1 for a new member, 0 for an owner that already held a slot (extended, counted once);
-- a full key asks first, since only an owner already in it may be extended there.
if count < limit or redis.call('ZSCORE', SLOTS, owner) then
  count = count + redis.call('ZADD', SLOTS, int(now + ttl), owner)
  outlive(ttl)
  return { 1, count, 0 }
end
local first = redis.call('ZRANGE', SLOTS, 0, 0, 'WITHSCORES')
return { 0, count, tonumber(first[2]) - now }
