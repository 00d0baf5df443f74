-- Put before every script: the call's time in microseconds, from `arg` when it is set
-- (tests replay schedules with it), else from Redis's own clock, so that instances whose
-- clocks disagree still agree.
local function clock_us(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local clock = redis.call('TIME')
  return tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end

