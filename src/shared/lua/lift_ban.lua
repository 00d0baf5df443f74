-- Lifts a ban for every instance: KEYS[1] (tollgate-ban:<zone>:{tag}:<key>) becomes a
-- tombstone, "lifted <at_ms>" (on Redis's clock), that bans nothing (ban.lua) and
-- refuses the write of a ban (set_ban.lua) until it expires: a write sent before the
-- lift that lands after it does not undo it.
--
-- KEYS[1]  the ban key
-- ARGV[1]  how long the tombstone lasts, in ms
--
-- Returns 1 when a ban was lifted, 0 when there was none.
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local held = redis.call('GET', KEYS[1])
local banned = 0
if held and string.sub(held, 1, 7) ~= 'lifted ' then
  banned = 1
end
redis.call('SET', KEYS[1], 'lifted ' .. string.format('%.0f', now_ms), 'PX', ARGV[1])
return banned
