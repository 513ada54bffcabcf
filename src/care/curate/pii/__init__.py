"""Personal-information removal for Chinese medical text: recognisers, lexical taggers, the clinical-term
and medical-word guards, the labelled evaluation sets and their scorer (see ``anonymiser``)."""
