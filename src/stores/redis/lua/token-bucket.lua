-- Token bucket as GCRA (src/algorithms/token-bucket.ts): state m, r (x, y), arrival time m + r/limit ms, in the hash.
--
-- Amounts are in 1/limit ms: a unit costs W of them, and the bucket holds W * B (B, the burst, is L
-- unless the policy says otherwise). A full bucket is forgotten, and a key without state starts I
-- tokens short of full: START of them (0 unless the policy sets initial tokens below the burst).
-- Every function takes the policy from the prelude's locals (the composite script reassigns them per part).

local function start_debt()
  return (B - I) * W
end

-- How far ahead of now the arrival time is, in 1/limit ms; a key without state (or a full bucket) starts anew.
local function debt(m, r, now)
  if m then
    local units = (m - now) * L + r
    if units > 0 then return units end
  end
  return start_debt()
end

local function from_debt(units, now)
  if units <= 0 then return nil end
  return now + math.floor(units / L), math.fmod(units, L)
end

-- How far past the bucket's capacity c more units would be, in 1/limit ms.
local function over(units, c)
  return math.max(0, units + c * W - W * B)
end

local impl = {
  n = 2,
  asked = { 'm', 'r', 'b' },
  in_hash = true,
  decode = function(v)
    if not (v[1] and v[2]) then return nil end
    return tonumber(v[1]), tonumber(v[2])
  end,
  discard = function() end,
  normalize = function(m, r, _, now)
    if m and (m - now) * L + r > 0 then return m, r end
    -- A new key's bucket starts now, so a consume it refuses still starts the refill that admits it later.
    return from_debt(start_debt(), now)
  end,
  try_consume = function(m, r, _, cost, now)
    local units = debt(m, r, now) + cost * W
    if units <= W * B then return from_debt(units, now) end
    return nil
  end,
  add = function(m, r, _, amount, now)
    return from_debt(math.min(debt(m, r, now) + amount * W, MAX_USAGE), now)
  end,
  remove = function(m, r, _, amount, now)
    return from_debt(debt(m, r, now) - amount * W, now)
  end,
  view = function(m, r, _, cost, now)
    local units = debt(m, r, now)
    local remaining = math.max(0, math.floor((W * B - units) / W))
    local empty = 0
    if remaining < 1 then empty = ceil_div(over(units, 1), L) end
    return remaining, ceil_div(units, L), ceil_div(over(units, cost), L), empty
  end,
  expires_at = function(m, r)
    if r > 0 then return m + 1 end
    return m
  end,
  finish = nil,
}
