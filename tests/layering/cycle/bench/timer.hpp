#pragma once
// A benchmark's header, which an example must not include (include/ <- src/ <- examples/ <- bench/).
