-- heartbeat on Redis: this instance says it is alive in one zone, and learns how many are.
-- The key is a sorted set of instance ids, each scored with the millisecond (on Redis's
-- clock) at which it expires unless renewed. Expired members are dropped on every call,
-- and the key itself expires with its last member. One key per call, so a Redis
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
-- The set lasts as long as its longest-lived member (not this caller's ttl: an instance
-- beating seldom must not be dropped because one beating often stopped).
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.max(tonumber(last[2]) - now_ms, 1)))
return redis.call('ZCARD', KEYS[1])
