#!/bin/sh
echo site bootstrap
