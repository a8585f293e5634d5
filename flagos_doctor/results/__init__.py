"""The results model that survey, compare, matrix, report and stacks share: the survey's
words (:mod:`.model`), verdicts (:mod:`.verdicts`), failure groups (:mod:`.groups`), the census
(:mod:`.census`), comparability (:mod:`.comparable`), the case record (:mod:`.case`), the results document
(:mod:`.document`) and the results file that owns it with its journal (:mod:`.resultsfile`).
Standard library and flagos_doctor's foundations; it imports nothing of any command."""
