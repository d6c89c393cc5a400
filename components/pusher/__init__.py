"""The Pusher: the blessed model published as the next version under the TF Serving model base path."""
