-- Put after now.lua before every script: the penalty box. In decide mode, when the call
-- names a ban key (KEYS[2], tollgate-ban:<zone>:{tag}:<key>, in KEYS[1]'s hash slot), a
-- key banned there is answered at once and its state is left untouched:
-- {0, left_us, 0, left_us, 0, 1} (index 6: banned). A lifted ban's tombstone
-- ("lifted <at_ms>", see lift_ban.lua) bans nothing.
if KEYS[2] and ARGV[#ARGV] == '' then
  local held = redis.call('GET', KEYS[2])
  if held and string.sub(held, 1, 7) ~= 'lifted ' then
    local left_ms = redis.call('PTTL', KEYS[2])
    if left_ms > 0 then
      return {0, left_ms * 1000, 0, left_ms * 1000, 0, 1}
    end
  end
end

