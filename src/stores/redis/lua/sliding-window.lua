-- Sliding window (src/algorithms/sliding-window.ts): state p = previous count, c = current count, s = window start (x, y, z), in the hash.

-- sliding-window.ts waitFor: admitted while p*(W-e) + (c+cost)*W <= L*W, all integers.
local function wait_for(p, c, s, cost, now)
  local e = now - s
  if p * (W - e) + (c + cost) * W <= L * W then return 0 end
  if c + cost <= L then
    local at = W - math.floor(((L - c - cost) * W) / p)
    return at - e
  end
  local at = W - math.floor(((L - cost) * W) / c)
  return s + W + at - now
end

local impl = {
  n = 3,
  asked = { 'p', 'c', 's', 'b' },
  in_hash = true,
  decode = function(v)
    if not (v[1] and v[2] and v[3]) then return nil end
    return tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  end,
  discard = function() end,
  normalize = function(p, c, s, now)
    if not p then return nil end
    local start = now - math.fmod(now, W)
    if s == start then return p, c, s end
    if s == start - W and c > 0 then return c, 0, start end
    return nil
  end,
  try_consume = function(p, c, s, cost, now)
    -- math.fmod is C fmod, i.e. JavaScript's %.
    if not p then p, c, s = 0, 0, now - math.fmod(now, W) end
    if wait_for(p, c, s, cost, now) > 0 then return nil end
    return p, c + cost, s
  end,
  add = function(p, c, s, amount, now)
    if not p then p, c, s = 0, 0, now - math.fmod(now, W) end
    return p, math.min(c + amount, MAX_USAGE), s
  end,
  remove = function(p, c, s, amount)
    if not p then return nil end
    return p, math.max(0, c - amount), s
  end,
  view = function(p, c, s, cost, now)
    if not p then return full_view() end
    local e = now - s
    local remaining = math.max(0, L - c - ceil_div(p * (W - e), W))
    local reset = 0
    if c > 0 then
      reset = s + 2 * W - now
    elseif p > 0 then
      reset = s + W - now
    end
    local empty = 0
    if remaining < 1 then empty = wait_for(p, c, s, 1, now) end
    return remaining, reset, wait_for(p, c, s, cost, now), empty
  end,
  expires_at = function(p, c, s)
    if c > 0 then return s + 2 * W end
    return s + W
  end,
  finish = nil,
}
