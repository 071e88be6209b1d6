-- Local-first leases over the fixed window's own hash (c, r, b): lease a slice of what remains, or give unused units back.
--
-- Appended to prelude.lua, so ARGV[1..4] (limit, window, block ms, client time) mean what they mean there
-- (a calendar window's ends included).
-- ARGV[5]   '1' lease, '2' return
-- ARGV[6]   now in ms when ARGV[4] = '1'; ignored otherwise (Redis TIME)
-- ARGV[7]   lease: need, the units the waiting consumes lack (0: a top-up no consume waits for, which
--           never blocks the key); return: the units to give back
-- ARGV[8]   lease: want, the slice the caller would like; return: the window end r the units were leased in
-- ARGV[9]   lease: the largest share of the remaining quota one lease may take, in thousandths
-- ARGV[10]  pub/sub channel, '' for none
-- ARGV[11]  sender id, so a process can skip its own restrictive messages
-- ARGV[12]  the store key, as messages name it
-- Lease returns { granted, remaining after the grant, ms to the window end (0: no window),
--                 ms of block left (0: none, -1: until reset), window end r (0: none) }.
-- Return returns the units given back.
--
-- A lease counts its units as consumed at once (c grows by the grant), so the fixed-window script,
-- which serves peek, reward, penalty, block and reset on the same hash, sees leased units as spent.

local MODE = ARGV[5]
local now = server_now
if CLIENT_TIME then now = tonumber(ARGV[6]) end
local CHANNEL, SENDER, SKEY = ARGV[10], ARGV[11], ARGV[12]

-- Messages are "kind\nsender\nms\nkey": x = exhausted for ms, b = blocked for ms (-1 = until reset),
-- a = units available again. The key goes last so it may hold any character, newlines included.
local function publish(kind, ms)
  if CHANNEL ~= '' then
    redis.call('PUBLISH', CHANNEL, kind .. '\n' .. SENDER .. '\n' .. int(ms) .. '\n' .. SKEY)
  end
end

local v = redis.call('HMGET', STATE, 'b', 'c', 'r')
local b = tonumber(v[1]) or 0
local c, r = tonumber(v[2]), tonumber(v[3])
if b > 0 and b <= now then b = 0 end
if not (c and r) or now >= r then
  c, r = nil, nil
end

if MODE == '2' then
  -- Only into the window the units came from: a later window never saw them.
  if c == nil or r ~= tonumber(ARGV[8]) or c <= 0 then return 0 end
  local back = math.min(tonumber(ARGV[7]), c)
  redis.call('HSET', STATE, 'c', int(c - back))
  -- Whoever heard "exhausted" refuses from memory; tell them the quota is back.
  if c >= L and c - back < L and b == 0 then publish('a', r - now) end
  return back
end

local need, want, share = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local window_left = 0
if r then window_left = r - now end

if b ~= 0 then
  local block_left = -1
  if b ~= BLOCK_FOREVER then block_left = b - now end
  return { 0, 0, window_left, block_left, r or 0 }
end

local used = c or 0
local remaining = L - used
if remaining < need or remaining <= 0 then
  -- The same as a refused consume in fixed-window.lua: with a block duration, it blocks the key.
  if BLOCK_MS > 0 and need > 0 then
    b = now + BLOCK_MS
    redis.call('HSET', STATE, 'b', int(b))
    local expires_at = b
    if r and r > b then expires_at = r end
    expire(STATE, expires_at - now)
    publish('b', BLOCK_MS)
    return { 0, 0, window_left, BLOCK_MS, r or 0 }
  end
  return { 0, math.max(0, remaining), window_left, 0, r or 0 }
end

-- At least what is needed, at most `share` of what remains, so quota parked in idle processes stays small.
local grant = math.max(need, math.min(want, math.max(1, math.floor(remaining * share / 1000))))
if grant > remaining then grant = remaining end
if r == nil then
  -- A calendar window ends with its period: a lease never spends across it (leases end at r).
  r = window_end(now)
  -- DEL first: an expired window or block must not linger in the hash.
  redis.call('DEL', STATE)
  redis.call('HSET', STATE, 'c', int(grant), 'r', int(r))
  expire(STATE, r - now)
else
  redis.call('HSET', STATE, 'c', int(used + grant))
end
if used + grant >= L then publish('x', r - now) end
return { grant, L - used - grant, r - now, 0, r }
