-- Imposes a ban that every instance honours: KEYS[1] (tollgate-ban:<zone>:{tag}:<key>)
-- holds "<strikes> <within_ms> <at_ms>" (why, and when on Redis's clock) and expires when
-- the ban ends. A ban already there (imposed by another instance) is left as it is, its
-- end and its reason included; so is a lifted ban's tombstone ("lifted <at_ms>", which
-- lasts longer than a write can be late: a write that lands after the lift does not
-- undo it).
--
-- KEYS[1]  the ban key
-- ARGV[1]  strikes
-- ARGV[2]  within_ms: the window they fell in
-- ARGV[3]  for_ms: how long the ban lasts
--
-- Returns 0 when written, the ms left of a ban already there, or -1 for a tombstone.
local held = redis.call('GET', KEYS[1])
if held then
  if string.sub(held, 1, 7) == 'lifted ' then
    return -1
  end
  return math.max(redis.call('PTTL', KEYS[1]), 1)
end
local clock = redis.call('TIME')
local at_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local why = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. string.format('%.0f', at_ms)
redis.call('SET', KEYS[1], why, 'PX', ARGV[3])
return 0
