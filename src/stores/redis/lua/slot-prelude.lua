-- Head of the concurrency-slot scripts (src/core/slots.ts SlotStore): the slot set, the time, and the set's TTL.
--
-- KEYS[1]   the key's slot set: owner ids scored by their expiry in ms (a slot counts while its expiry is after now)
-- ARGV[1]   '1' when ARGV[2] carries the caller's time (the store has a clock); '0' to use Redis TIME
-- ARGV[2]   the caller's time in ms (read only with ARGV[1] = '1')
-- ARGV[3..] the script's own arguments

local SLOTS = KEYS[1]
local CLIENT_TIME = ARGV[1] == '1'
-- With a client clock the TTL cannot follow that clock (Redis expires keys by its own time), so it only
-- collects garbage and gets enough slack that a clock lagging Redis never loses a slot.
local CLIENT_TIME_MIN_TTL = 60000

-- redis.call formats Lua numbers with %.14g or %.17g depending on the version; timestamps must stay exact.
local function int(x)
  return string.format('%d', x)
end

local now
if CLIENT_TIME then
  now = tonumber(ARGV[2])
else
  -- Redis before 5 replicates scripts verbatim and refuses writes after TIME unless told otherwise.
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Keeps the set at least until a slot written with this ttl expires: the set's TTL is the latest expiry.
local function outlive(ttl)
  if CLIENT_TIME and ttl < CLIENT_TIME_MIN_TTL then ttl = CLIENT_TIME_MIN_TTL end
  local left = redis.call('PTTL', SLOTS)
  if left >= 0 and left >= ttl then return end
  redis.call('PEXPIRE', SLOTS, int(ttl))
end
