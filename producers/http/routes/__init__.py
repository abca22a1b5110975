"""The HTTP app's routes, one module per resource, each an ``APIRouter`` the app includes: they
take the client, the caller and the searches from ``producers.http.deps``, never from the app."""
