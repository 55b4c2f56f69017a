from spacy_elmo.fast.lru import LRUCache


def test_least_recently_used_goes_first_once_the_costs_exceed_the_bound():
    cache = LRUCache(10)
    cache.put("a", 1, 4)
    cache.put("b", 2, 4)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3, 4)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.cost == 8 and len(cache) == 2


def test_putting_a_key_again_replaces_its_value_and_cost():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.get("a") == 10 and "b" not in cache and cache.cost == 2


def test_an_entry_over_the_bound_alone_is_not_kept_and_clear_empties():
    cache = LRUCache(3)
    cache.put("a", 1, 1)
    cache.put("big", 2, 5)
    assert len(cache) == 0 and cache.cost == 0 and cache.get("big") is None
    cache.put("a", 1, 1)
    cache.clear()
    assert len(cache) == 0 and cache.cost == 0
