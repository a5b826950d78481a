"""Model versions: the model repository, the deployment guard, hot swap and rollback in the workers,
the admin routes and the processes' shared orders."""
