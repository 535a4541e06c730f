"""The seed systems' own client routes: seed 001's `/api/health` and `/api/status`, seed
002's `POST /chat`, seed 004's `GET /ai`, in the shapes their clients read. Translate
the turn event stream; reach data only through services."""
