/** The wrk script of the proxy scenarios: each request carries one of 20 API keys in X-API-KEY, drawn at random. */
export const API_KEYS_WRK_LUA = `
local keys = {}
for i = 1, 20 do keys[i] = "api-key-" .. i end
request = function()
  return wrk.format("GET", "/", { ["X-API-KEY"] = keys[math.random(1, 20)] })
end
`;
