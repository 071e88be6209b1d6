-- Token bucket as GCRA (src/algorithms/token-bucket.ts): state { m, r }, arrival time m + r/limit ms, in the hash.

-- How far ahead of now the arrival time is, in 1/limit ms.
local function debt(state, now)
  if not state then return 0 end
  return math.max(0, (state.m - now) * L + state.r)
end

local function from_debt(units, now)
  if units <= 0 then return nil end
  return { m = now + math.floor(units / L), r = math.fmod(units, L) }
end

local impl = new_impl({ 'm', 'r' }, true)

function impl.decode(v)
  if not (v[1] and v[2]) then return nil end
  return { m = tonumber(v[1]), r = tonumber(v[2]) }
end

function impl.encode(state)
  return { 'm', int(state.m), 'r', int(state.r) }
end

function impl.discard(state) end

function impl.normalize(state, now)
  if debt(state, now) > 0 then return state end
  return nil
end

function impl.try_consume(state, cost, now)
  local units = debt(state, now) + cost * W
  if units <= W * L then return from_debt(units, now) end
  return nil
end

function impl.add(state, amount, now)
  return from_debt(debt(state, now) + amount * W, now)
end

function impl.remove(state, amount, now)
  return from_debt(debt(state, now) - amount * W, now)
end

-- How far past the bucket's capacity c more units would be, in 1/limit ms.
local function over(units, c)
  return math.max(0, units + c * W - W * L)
end

function impl.view(state, cost, now)
  if not state then return full_view() end
  local units = debt(state, now)
  local remaining = math.max(0, math.floor((W * L - units) / W))
  local empty = 0
  if remaining < 1 then empty = ceil_div(over(units, 1), L) end
  return remaining, ceil_div(units, L), ceil_div(over(units, cost), L), empty
end

function impl.expires_at(state)
  if state.r > 0 then return state.m + 1 end
  return state.m
end
