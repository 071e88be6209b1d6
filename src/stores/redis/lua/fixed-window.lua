-- Fixed window (src/algorithms/fixed-window.ts): state { c = units used, r = absolute window end } in the hash.

local function fw_open(state, now)
  if state then return { c = state.c, r = state.r } end
  return { c = 0, r = window_end(now) }
end

local impl = new_impl({ 'c', 'r' }, true)

function impl.decode(v)
  if not (v[1] and v[2]) then return nil end
  return { c = tonumber(v[1]), r = tonumber(v[2]) }
end

function impl.encode(state)
  return { 'c', int(state.c), 'r', int(state.r) }
end

function impl.discard(state) end

function impl.normalize(state, now)
  if state and now < state.r then return state end
  return nil
end

function impl.try_consume(state, cost, now)
  local nxt = fw_open(state, now)
  if nxt.c + cost > L then return nil end
  nxt.c = nxt.c + cost
  return nxt
end

function impl.add(state, amount, now)
  local nxt = fw_open(state, now)
  nxt.c = nxt.c + amount
  return nxt
end

function impl.remove(state, amount, now)
  if not state then return nil end
  return { c = math.max(0, state.c - amount), r = state.r }
end

function impl.view(state, cost, now)
  if not state then return full_view() end
  local remaining = math.max(0, L - state.c)
  local until_end = state.r - now
  local reset, retry, empty = 0, until_end, until_end
  if state.c > 0 then reset = until_end end
  if state.c + cost <= L then retry = 0 end
  if remaining >= 1 then empty = 0 end
  return remaining, reset, retry, empty
end

function impl.expires_at(state)
  return state.r
end
