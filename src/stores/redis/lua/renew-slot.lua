-- Renew: moves the owner's unexpired slot's expiry to ttl from now. Returns 1 when renewed, else 0;
-- an expired slot is dropped, never revived (another owner may have its place).
-- ARGV[3] owner id, ARGV[4] ttl ms.

local owner = ARGV[3]
local ttl = tonumber(ARGV[4])
local expires_at = redis.call('ZSCORE', SLOTS, owner)
if not expires_at then return 0 end
if tonumber(expires_at) <= now then
  redis.call('ZREM', SLOTS, owner)
  return 0
end
redis.call('ZADD', SLOTS, 'XX', int(now + ttl), owner)
outlive(ttl)
return 1
