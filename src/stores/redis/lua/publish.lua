-- Publishes one local-first message (see lease-fixed-window.lua) for operations the fixed-window script applied.
-- KEYS[1] the key's state hash, only so a cluster routes the call like the key's other calls
-- ARGV[1] channel, ARGV[2] message
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
