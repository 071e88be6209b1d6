-- Sliding log (src/algorithms/sliding-log.ts): the timestamps live in the list KEYS[2], oldest first; state is its length n (x).
--
-- The TypeScript functions return new arrays; here they edit the list in place instead, so a
-- call costs O(units changed) rather than O(limit). The list holds exactly the array the
-- TypeScript would hold, so every view reads the same timestamps.

local LOG = KEYS[2]
local SCAN_CHUNK = 32
local PUSH_CHUNK = 1000

-- Timestamps already read or written during this script, by list index. A batch of operations on
-- one key reads the same few indexes again and again (the head for trimming, the newest for the
-- reset, the unit that must leave for retryAfter), so each is fetched once; every edit that moves
-- indexes clears the cache.
local cache = {}
-- Whether this script appended to the log: its TTL is then set once at the end, not per push.
local log_pushed = false

local function ts(i)
  local v = cache[i]
  if v == nil then
    v = tonumber(redis.call('LINDEX', LOG, i))
    cache[i] = v
  end
  return v
end

-- Appends amount copies of now (sliding-log.ts pushMany); RPUSH in chunks to stay under Lua's unpack limit.
-- Returns the new length.
local function push_many(n, amount, now)
  local v = int(now)
  local chunk = {}
  local left = amount
  while left > 0 do
    local k = math.min(left, PUSH_CHUNK)
    for i = 1, k do chunk[i] = v end
    redis.call('RPUSH', LOG, unpack(chunk, 1, k))
    left = left - k
  end
  -- Appending leaves the existing indexes in place, so the cache stays valid and learns the new ones.
  for i = n, n + amount - 1 do cache[i] = now end
  log_pushed = true
  return n + amount
end

local impl = {
  n = 0,
  asked = { 'b' },
  in_hash = false,
  decode = function()
    local n = redis.call('LLEN', LOG)
    if n == 0 then return nil end
    return n
  end,
  discard = function(n)
    if n then redis.call('DEL', LOG) end
    cache = {}
    log_pushed = false
  end,
  -- Drops the leading timestamps at or before now - W, stopping at the first later one, as the TypeScript does.
  normalize = function(n, _, _, now)
    if not n then return nil end
    local cutoff = now - W
    if ts(0) > cutoff then return n end
    local first = 1
    while first < n do
      local chunk = redis.call('LRANGE', LOG, first, first + SCAN_CHUNK - 1)
      local k = 1
      while k <= #chunk and tonumber(chunk[k]) <= cutoff do k = k + 1 end
      first = first + k - 1
      if k <= #chunk or #chunk == 0 then break end
    end
    cache = {}
    if first >= n then
      redis.call('DEL', LOG)
      log_pushed = false
      return nil
    end
    redis.call('LTRIM', LOG, first, -1)
    return n - first
  end,
  try_consume = function(n, _, _, cost, now)
    n = n or 0
    if n + cost <= L then return push_many(n, cost, now) end
    return nil
  end,
  -- At most L timestamps per penalty, as sliding-log.ts add: L at now already refuse every consume until now + W.
  add = function(n, _, _, amount, now)
    return push_many(n or 0, math.min(amount, L), now)
  end,
  -- Drops the newest amount timestamps.
  remove = function(n, _, _, amount)
    if not n then return nil end
    local keep = math.max(0, n - amount)
    -- Dropping the newest units leaves the older indexes in place.
    for i = keep, n - 1 do cache[i] = nil end
    if keep == 0 then
      redis.call('DEL', LOG)
      log_pushed = false
      return nil
    end
    redis.call('LTRIM', LOG, 0, keep - 1)
    return keep
  end,
  view = function(n, _, _, cost, now)
    if not n then return full_view() end
    local remaining = math.max(0, L - n)
    -- The unit at index n+cost-L-1 must leave the window before cost fits.
    local retry = 0
    if n + cost > L then retry = ts(n + cost - L - 1) + W - now end
    local empty = 0
    if remaining < 1 then empty = ts(n - L) + W - now end
    return remaining, ts(n - 1) + W - now, retry, empty
  end,
  expires_at = function(n)
    return ts(n - 1) + W
  end,
  -- Called once after the batch (apply.lua): the newest timestamp is the last push's now, so the
  -- log is worthless W ms from then (expires_at); one PEXPIRE instead of one per push.
  finish = function()
    if log_pushed then expire(LOG, W) end
  end,
}
