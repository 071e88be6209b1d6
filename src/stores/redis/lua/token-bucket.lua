-- Token bucket as GCRA (src/algorithms/token-bucket.ts): state m, r (x, y), arrival time m + r/limit ms, in the hash.
--
-- Amounts are in 1/limit ms: a unit costs W of them, and the bucket holds CAPACITY = W * L (a full
-- bucket's worth of arrivals). Every function takes the policy from the prelude's locals, so another
-- policy argument (a burst apart from the rate) is one more local read here, not a new state field.

-- How far ahead of now the arrival time is, in 1/limit ms.
local function debt(m, r, now)
  if not m then return 0 end
  return math.max(0, (m - now) * L + r)
end

local function from_debt(units, now)
  if units <= 0 then return nil end
  return now + math.floor(units / L), math.fmod(units, L)
end

-- How far past the bucket's capacity c more units would be, in 1/limit ms.
local function over(units, c)
  return math.max(0, units + c * W - W * L)
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
    if debt(m, r, now) > 0 then return m, r end
    return nil
  end,
  try_consume = function(m, r, _, cost, now)
    local units = debt(m, r, now) + cost * W
    if units <= W * L then return from_debt(units, now) end
    return nil
  end,
  add = function(m, r, _, amount, now)
    return from_debt(debt(m, r, now) + amount * W, now)
  end,
  remove = function(m, r, _, amount, now)
    return from_debt(debt(m, r, now) - amount * W, now)
  end,
  view = function(m, r, _, cost, now)
    if not m then return full_view() end
    local units = debt(m, r, now)
    local remaining = math.max(0, math.floor((W * L - units) / W))
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
