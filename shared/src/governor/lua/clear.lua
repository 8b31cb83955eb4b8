-- Ends the deployment's cooldown and down time (an operator marked it up). The throttle
-- count stays. Answers 1.
redis.call('HSET', state, 'cooldown_until', 0, 'down_until', 0)
return 1
