-- Sliding window (src/algorithms/sliding-window.ts): state { p = previous count, c = current count, s = window start } in the hash.

local function sw_open(state, now)
  if state then return { p = state.p, c = state.c, s = state.s } end
  -- math.fmod is C fmod, i.e. JavaScript's %.
  return { p = 0, c = 0, s = now - math.fmod(now, W) }
end

-- sliding-window.ts waitFor: admitted while p*(W-e) + (c+cost)*W <= L*W, all integers.
local function wait_for(state, cost, now)
  local e = now - state.s
  if state.p * (W - e) + (state.c + cost) * W <= L * W then return 0 end
  if state.c + cost <= L then
    local at = W - math.floor(((L - state.c - cost) * W) / state.p)
    return at - e
  end
  local at = W - math.floor(((L - cost) * W) / state.c)
  return state.s + W + at - now
end

local impl = new_impl({ 'p', 'c', 's' }, true)

function impl.decode(v)
  if not (v[1] and v[2] and v[3]) then return nil end
  return { p = tonumber(v[1]), c = tonumber(v[2]), s = tonumber(v[3]) }
end

function impl.encode(state)
  return { 'p', int(state.p), 'c', int(state.c), 's', int(state.s) }
end

function impl.discard(state) end

function impl.normalize(state, now)
  if not state then return nil end
  local start = now - math.fmod(now, W)
  if state.s == start then return state end
  if state.s == start - W and state.c > 0 then return { p = state.c, c = 0, s = start } end
  return nil
end

function impl.try_consume(state, cost, now)
  local nxt = sw_open(state, now)
  if wait_for(nxt, cost, now) > 0 then return nil end
  nxt.c = nxt.c + cost
  return nxt
end

function impl.add(state, amount, now)
  local nxt = sw_open(state, now)
  nxt.c = nxt.c + amount
  return nxt
end

function impl.remove(state, amount, now)
  if not state then return nil end
  return { p = state.p, c = math.max(0, state.c - amount), s = state.s }
end

function impl.view(state, cost, now)
  if not state then return full_view() end
  local e = now - state.s
  local remaining = math.max(0, L - state.c - ceil_div(state.p * (W - e), W))
  local reset = 0
  if state.c > 0 then
    reset = state.s + 2 * W - now
  elseif state.p > 0 then
    reset = state.s + W - now
  end
  local empty = 0
  if remaining < 1 then empty = wait_for(state, 1, now) end
  return remaining, reset, wait_for(state, cost, now), empty
end

function impl.expires_at(state)
  if state.c > 0 then return state.s + 2 * W end
  return state.s + W
end
