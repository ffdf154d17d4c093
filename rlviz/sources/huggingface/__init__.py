"""The Hugging Face Hub (``hf://ORG/REPO``): fetching a repo's files, pinned, and the validated cache."""
