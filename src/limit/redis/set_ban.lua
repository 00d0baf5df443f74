-- Imposes a ban that every instance honours: KEYS[1] (tollgate:ban:{tag}:<zone>:<key>)
-- holds "<strikes> <within_ms> <at_ms>" (why, and when on Redis's clock) and expires when
-- the ban ends.
--
-- KEYS[1]  the ban key
-- ARGV[1]  strikes
-- ARGV[2]  within_ms: the window they fell in
-- ARGV[3]  for_ms: how long the ban lasts
local clock = redis.call('TIME')
local at_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local why = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. string.format('%.0f', at_ms)
redis.call('SET', KEYS[1], why, 'PX', ARGV[3])
return 1
