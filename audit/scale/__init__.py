"""Where and how tasks run: sweep/shadow planning (plan), executors (local, pool, Ray) and the task functions."""
