-- Sliding log (src/algorithms/sliding-log.ts): the timestamps live in the list KEYS[2], oldest first; state is { n = length }.
--
-- The TypeScript functions return new arrays; here they edit the list in place instead, so a
-- call costs O(units changed) rather than O(limit). The list holds exactly the array the
-- TypeScript would hold, so every view reads the same timestamps.

local LOG = KEYS[2]
local SCAN_CHUNK = 32
local PUSH_CHUNK = 1000

local function ts(i)
  return tonumber(redis.call('LINDEX', LOG, i))
end

-- Appends amount copies of now (sliding-log.ts pushMany); RPUSH in chunks to stay under Lua's unpack limit.
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
  -- The newest timestamp is now, so the log is worthless W ms from now (expires_at).
  expire(LOG, W)
  return { n = n + amount }
end

local impl = {
  fields = {},
  in_hash = false,
}

function impl.decode(v)
  local n = redis.call('LLEN', LOG)
  if n == 0 then return nil end
  return { n = n }
end

function impl.encode(state)
  return {}
end

function impl.discard(state)
  if state then redis.call('DEL', LOG) end
end

-- Drops the leading timestamps at or before now - W, stopping at the first later one, as the TypeScript does.
function impl.normalize(state, now)
  if not state then return nil end
  local cutoff = now - W
  if ts(0) > cutoff then return state end
  local n = state.n
  local first = 1
  while first < n do
    local chunk = redis.call('LRANGE', LOG, first, first + SCAN_CHUNK - 1)
    local k = 1
    while k <= #chunk and tonumber(chunk[k]) <= cutoff do k = k + 1 end
    first = first + k - 1
    if k <= #chunk or #chunk == 0 then break end
  end
  if first >= n then
    redis.call('DEL', LOG)
    return nil
  end
  redis.call('LTRIM', LOG, first, -1)
  return { n = n - first }
end

function impl.try_consume(state, cost, now)
  local n = state and state.n or 0
  if n + cost <= L then return push_many(n, cost, now) end
  return nil
end

function impl.add(state, amount, now)
  return push_many(state and state.n or 0, amount, now)
end

-- Drops the newest amount timestamps.
function impl.remove(state, amount, now)
  if not state then return nil end
  local keep = math.max(0, state.n - amount)
  if keep == 0 then
    redis.call('DEL', LOG)
    return nil
  end
  redis.call('LTRIM', LOG, 0, keep - 1)
  return { n = keep }
end

function impl.view(state, cost, now)
  if not state then return full_view() end
  local n = state.n
  local remaining = math.max(0, L - n)
  -- The unit at index n+cost-L-1 must leave the window before cost fits.
  local retry = 0
  if n + cost > L then retry = ts(n + cost - L - 1) + W - now end
  local empty = 0
  if remaining < 1 then empty = ts(n - L) + W - now end
  return { remaining = remaining, reset = ts(n - 1) + W - now, retry = retry, empty = empty }
end

function impl.expires_at(state)
  return ts(state.n - 1) + W
end
