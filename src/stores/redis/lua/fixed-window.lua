-- Fixed window (src/algorithms/fixed-window.ts): state c = units used, r = absolute window end (x, y), in the hash.

local impl = {
  n = 2,
  asked = { 'c', 'r', 'b' },
  in_hash = true,
  decode = function(v)
    if not (v[1] and v[2]) then return nil end
    return tonumber(v[1]), tonumber(v[2])
  end,
  discard = function() end,
  normalize = function(c, r, _, now)
    if c and now < r then return c, r end
    return nil
  end,
  try_consume = function(c, r, _, cost, now)
    if not c then c, r = 0, window_end(now) end
    if c + cost > L then return nil end
    return c + cost, r
  end,
  add = function(c, r, _, amount, now)
    if not c then c, r = 0, window_end(now) end
    return math.min(c + amount, MAX_USAGE), r
  end,
  remove = function(c, r, _, amount)
    if not c then return nil end
    return math.max(0, c - amount), r
  end,
  view = function(c, r, _, cost, now)
    if not c then return full_view() end
    local remaining = math.max(0, L - c)
    local until_end = r - now
    local reset, retry, empty = 0, until_end, until_end
    if c > 0 then reset = until_end end
    if c + cost <= L then retry = 0 end
    if remaining >= 1 then empty = 0 end
    return remaining, reset, retry, empty
  end,
  expires_at = function(c, r)
    return r
  end,
  finish = nil,
}
