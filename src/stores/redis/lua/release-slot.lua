-- Release: frees the owner's slot. Returns 1 when an unexpired slot of that owner was freed, else 0
-- (an expired slot of the owner is dropped too, but freed nothing: its place was already free).

local owner = ARGV[3]
local expires_at = redis.call('ZSCORE', SLOTS, owner)
if not expires_at then return 0 end
redis.call('ZREM', SLOTS, owner)
if tonumber(expires_at) > now then return 1 end
return 0
