-- heartbeat on Redis: this instance says it is alive in one zone, and learns how many are.
-- The key is a sorted set of instance ids, each scored with the millisecond (on Redis's
-- clock) at which it expires unless renewed. Expired members are dropped on every call,
-- and the key itself expires when no instance renews it. One key per call, so a Redis
-- Cluster can run it on the key's shard.
--
-- KEYS[1]  tollgate-instances:<zone>
-- ARGV[1]  this instance's id
-- ARGV[2]  ttl: how long the announcement lasts, ms
-- ARGV[3]  the time in microseconds, or "" for Redis's own clock (only tests set it)
--
-- Returns the number of instances announced and not expired, this one included.

local ttl = tonumber(ARGV[2])
local now_ms = math.floor(clock_us(ARGV[3]) / 1000)

redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + ttl), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now_ms))
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
