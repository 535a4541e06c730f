"""Reply-model adapters behind the `ReplyModel` port."""
