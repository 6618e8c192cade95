"""Conversations as objects: branches, greetings, who the user is (issue 37)."""
